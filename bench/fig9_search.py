"""SwapAdvisor Figures 9b and 9c, simulated: the genetic search's best, mean and worst alive
individual generation by generation, with the paper's restricted size-class mapping (9b) and
with an unrestricted one (9c: any size to any class, allocator.unrestricted_classes), on the
same model, budget, seed and evaluation budget.

The paper's x axis is search seconds (30 minutes on 72 cores); ours is evaluations (plans +
simulations), and every search stops at a generation cap: seeded, so the table does not depend
on the clock or on the machine's load. The first generation is random in both searches, as
the paper's ("The first generation of sample is randomly generated", Section 6.4).

    python -m bench.fig9_search [--quick] [--save]    # writes bench/results/papers_fig9[_quick]_<date>.txt

(``python -m bench.papers --only fig9`` prints the same section; this entry point also draws
the PNG where matplotlib is installed, and saves under its own name.)
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass

from ga.history import GenerationStats

GIB = 2**30
MIB = 2**20
# Within this fraction of its value at the end of the search, a curve has converged.
CONVERGED = 0.05


@dataclass(frozen=True)
class Setting:
    model: str
    batch: int
    size: int | None               # input image size (None: the model's)
    device_bytes: int
    population: int
    generations: int
    seed: int = 0

    def words(self) -> str:
        image = f", {self.size}x{self.size}" if self.size else ""
        return (f"{self.model} batch {self.batch}{image}, {self.device_bytes / GIB:g} GiB, analytic V100 profile, "
                f"population {self.population}, {self.generations} generations ({self.population} children each), "
                f"seed {self.seed}, one worker")


def settings(quick: bool) -> list[Setting]:
    """The searches: Inception-4 is 9b/9c's model, WResNet-152-10 a second for the text's 'universal
    to all the evaluated models', both at Table 1's batch in 16 GiB with the paper's population;
    quick: a tiny Inception in half its peak."""
    if quick:
        return [Setting("inception-4", 2, 75, int(0.5 * 7.433 * GIB), 6, 3)]
    from zoo.stats import PAPER
    batch = {p.model: p.batch for p in PAPER}
    return [Setting(m, batch[m], None, 16 * GIB, 144, 25) for m in ("inception-4", "wresnet-152-10")]


@dataclass
class Run:
    setting: Setting
    mapping: str                   # "restricted" (9b) or "unrestricted" (9c)
    history: list[GenerationStats]
    sizes: int                     # distinct tensor sizes (N)
    cpu_s: float


def run(setting: Setting, mapping: str) -> Run:
    """One search, history kept; deterministic (seeded, generation cap, first generation random)."""
    import zoo
    from engine.profile import analytic_profile
    from ga.search import SearchOptions, search
    from planner.budget import make_budget
    from planner.facts import GraphFacts

    g = zoo.build(setting.model, batch=setting.batch, **({"size": setting.size} if setting.size else {}))
    facts = GraphFacts(g)
    # The paper's genome is a schedule and an allocation: no knobs; the pool, so that every plan
    # runs on the searched allocation (auto may pick chunks, which ignore it).
    opts = SearchOptions(population=setting.population, max_generations=setting.generations, seed=setting.seed,
                         workers=1, seeded=False, knobs=False, allocator="pool", size_mapping=mapping,
                         progress=False, ideal=False)
    t0 = time.process_time()
    result = search(facts, make_budget(facts, setting.device_bytes), analytic_profile("v100"), opts)
    return Run(setting, mapping, result.history, len(facts.demand.sizes), time.process_time() - t0)


def converged_at(history: list[GenerationStats], column: str, within: float = CONVERGED) -> int | None:
    """Evaluations after which ``column`` (best or mean alive) stays within ``within`` of its
    value at the end of the search; None where the last value is not finite."""
    values = [getattr(r, column) for r in history]
    final = values[-1]
    if not math.isfinite(final):
        return None
    at = history[-1].evaluations
    for r, v in zip(reversed(history), reversed(values)):
        if not (math.isfinite(v) and abs(v - final) <= within * final):
            break
        at = r.evaluations
    return at


def shown_generations(n: int) -> list[int]:
    """Generations to print of n + 1 rows: 0, 1, 2, 4, 8, ... and the last."""
    shown, g = [0], 1
    while g < n:
        shown.append(g)
        g *= 2
    return sorted(set(shown + [n]))


def mapping_counts(n: int) -> tuple[float, float]:
    """log10 of the restricted mappings of n sorted sizes (2^(n-1): a class break or not between
    neighbours) and of the unrestricted ones (the Bell number B(n): every grouping of the sizes)."""
    row = [1]                       # Bell triangle
    for _ in range(n - 1):
        nxt = [row[-1]]
        for x in row:
            nxt.append(nxt[-1] + x)
        row = nxt
    return (n - 1) * math.log10(2), math.log10(row[-1])


def fmt(x: float) -> str:
    return "inf" if not math.isfinite(x) else f"{x:.4f}"


def draw(runs: list[Run], path: str) -> None:
    """Figure 9b beside 9c per setting: best, mean and worst alive against evaluations, on one y
    scale so that the two panels compare. Raises ImportError without matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    settings_ = list(dict.fromkeys(r.setting for r in runs))
    fig, axes = plt.subplots(len(settings_), 2, figsize=(10, 3.6 * len(settings_)), sharey="row", squeeze=False,
                             layout="constrained")
    for row, st in zip(axes, settings_):
        for ax, (mapping, panel) in zip(row, (("restricted", "9b"), ("unrestricted", "9c"))):
            r = next((r for r in runs if r.setting == st and r.mapping == mapping), None)
            if r is None:
                ax.set_visible(False)
                continue
            x = [h.evaluations for h in r.history]
            for name, style in (("worst", ":"), ("mean", "--"), ("best", "-")):
                ax.plot(x, [getattr(h, name) if math.isfinite(getattr(h, name)) else np.nan for h in r.history],
                        style, marker="o", markersize=3, label=f"{name} alive")
            ax.set_title(f"{panel}: {st.model} b{st.batch}, {mapping} mapping", fontsize=9)
            ax.set_xlabel("evaluations (plans + simulations)")
            ax.set_ylabel("simulated s/iteration")
            ax.legend(fontsize=7)
    fig.suptitle("SwapAdvisor Figure 9b/9c, simulated (analytic V100; seeded, generation cap)", fontsize=10)
    try:
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)


def main(argv=None) -> int:
    from bench.papers import figure9_section
    from bench.results_file import planning_machine_line, save_results

    ap = argparse.ArgumentParser(prog="python -m bench.fig9_search", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a tiny Inception, 3 generations of 6")
    ap.add_argument("--save", action="store_true", help="write bench/results/papers_fig9[_quick]_<date>.txt and .png")
    args = ap.parse_args(argv)
    started = time.process_time()
    runs = [run(st, m) for st in settings(args.quick) for m in ("restricted", "unrestricted")]
    lines = [f"# python -m bench.fig9_search {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip(),
             f"# {planning_machine_line()}",
             "# deterministic: seeded searches stopped at a generation cap; CPU seconds below are this process's "
             "(one worker), on a shared, loaded machine: indicative only", "",
             figure9_section(runs).text(),
             *(f"({r.setting.model} {r.mapping}: {r.cpu_s:.0f} CPU s)" for r in runs),
             f"total {time.process_time() - started:.0f} CPU s"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.save:
        name = "papers_fig9_quick" if args.quick else "papers_fig9"
        print(f"saved {save_results(name, text)}")
        try:
            path = os.path.join("bench", "results", f"{name}.png")
            draw(runs, path)
            print(f"figure: {path}")
        except ImportError:         # the plot extra is not installed: the table stands without it
            print("figure: not drawn (matplotlib is not installed: pip install '.[plot]')")
    return 0


if __name__ == "__main__":
    sys.exit(main())
