"""Keep, swap or recompute at the paper's settings: the five Table 1 models (their batches,
analytic V100 profile, 16 GiB) planned by the swap-only SwapAdvisor (``--swap-only``), the joint
SwapAdvisor (keep, swap or recompute), Capuchin's per-tensor choice and sqrt(n) checkpointing,
side by side. Per plan: simulated seconds, fraction of ideal (the sum of op times), recomputations,
bytes copied in, and the plan's time over the lower bound of its order that holds when
recomputing (x bound) and over the swap-only bound (x swap bound).

    python -m bench.recompute_table [--models nasnet-25,...] [--search-seconds 0 | --search-evaluations N] [--save]

With --search-seconds S the two SwapAdvisor rows each get an S-second genetic search (one worker
per core), the same seed, and ends with its knob polish (ga/polish.py; "+N" in gens/evals:
its evaluations, after the time limit); capuchin and checkpoint never search.
"""
from __future__ import annotations

import argparse
import io
import os
import sys
import time

from tabulate import tabulate

import zoo
from bench.plan_quality import machine
from bench.results_file import save_results
from engine.library.planning import plan, plan_bounds
from engine.profile import analytic_profile
from planner import policy
from planner.errors import PlanError
from planner.facts import GraphFacts
from planner.policy import RECOMPUTE_OPTION
from zoo.stats import PAPER

# (row, policy, fixed policy options)
ROWS = (("swapadvisor, swap only", "swapadvisor", {RECOMPUTE_OPTION: 0.0}), ("swapadvisor", "swapadvisor", {}),
        ("capuchin", "capuchin", {}), ("checkpoint", "checkpoint", {}))


def search_options(seconds: float, evaluations: int | None = None, seed: int = 0):
    """An S-second genetic search, one worker per core, or one of ``evaluations`` candidates
    whatever the time (the same plan on a busy machine as on a quiet one); None for neither (no
    search)."""
    if not seconds and not evaluations:
        return None
    from ga.search import SearchOptions
    if evaluations:
        return SearchOptions(seed=seed, max_evaluations=evaluations, max_generations=10**9,
                             workers=os.cpu_count() or 1, progress=False)
    return SearchOptions(seed=seed, time_limit_s=seconds, workers=os.cpu_count() or 1, progress=False)


def model_rows(name: str, device_bytes: int, search_seconds: float, say, rows_wanted=ROWS,
               search_evaluations: int | None = None, seed: int = 0) -> list[list]:
    """The table's rows for ``name`` (``rows_wanted``: a subset of ``ROWS``, in their order)."""
    batch = next(p for p in PAPER if p.model == name).batch
    g = zoo.build(name, batch=batch)
    facts = GraphFacts(g)
    profile = analytic_profile("v100")
    secs = profile.node_seconds(g)
    ideal = float(secs.sum())
    search = search_options(search_seconds, search_evaluations, seed)
    rows = []
    for label, name_, options in rows_wanted:
        t0 = time.perf_counter()
        searched = []
        try:
            p = plan(g, policy.get(name_), profile, device_bytes, policy_options=options, search=search,
                     facts=facts, on_search=searched.append)
        except PlanError as e:
            say(f"{name} {label}: {e}")
            rows.append([name, label, "does not plan", "", "", "", "", "", "", ""])
            continue
        b = plan_bounds(p.program, facts, p.budget, profile, secs)
        found = searched[0] if searched else None
        rows.append([name, label, f"{p.seconds:.3f}", f"{ideal / p.seconds:.3f}", p.program.recomputes,
                     f"{p.h2d_bytes / 1e9:.1f}", f"{p.seconds / b.recompute_bound:.2f}", f"{p.seconds / b.bound:.2f}",
                     (f"{found.generations}/{found.evaluations}"
                      + (f" +{found.polished.evaluations}" if found.polished else "")) if found else "",
                     found.knobs_chosen() if found else ""])
        say(f"{name} {label}: {p.seconds:.3f} s ({time.perf_counter() - t0:.0f} s to plan)"
            + (f"; knob polish: {found.polished.describe()}" if found and found.polished else ""))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(p.model for p in PAPER))
    ap.add_argument("--budget-gib", type=float, default=16.0)
    ap.add_argument("--search-seconds", type=float, default=0.0)
    ap.add_argument("--search-evaluations", type=int, default=None,
                    help="instead of --search-seconds: stop each search after N candidates (the same plan "
                         "whatever the machine's load)")
    ap.add_argument("--seed", type=int, default=0, help="the search's seed (default 0)")
    ap.add_argument("--rows", default=";".join(r[0] for r in ROWS),
                    help="which rows, by label, separated by ';' (default: all)")
    ap.add_argument("--save", action="store_true", help="write bench/results/recompute_table_<date>.txt")
    a = ap.parse_args(argv)
    out = io.StringIO()

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    rows = []
    for name in a.models.split(","):
        labels = set(a.rows.split(";"))
        rows += model_rows(name, int(a.budget_gib * 2**30), a.search_seconds, say,
                           tuple(r for r in ROWS if r[0] in labels), a.search_evaluations, a.seed)
    effort = (f"search {a.search_evaluations} evaluations" if a.search_evaluations
              else f"search {a.search_seconds:g} s") + f", seed {a.seed}"
    print(f"# {machine()}; analytic V100 profile, {a.budget_gib:g} GiB, the paper's batches; "
          f"{effort} per SwapAdvisor row", file=out)
    print(tabulate(rows, headers=["model", "plan", "sim s", "of ideal", "recomputes", "h2d GB", "x bound",
                                  "x swap bound", "gens/evals +polish", "knobs chosen"],
                   disable_numparse=True), file=out)
    print(out.getvalue(), end="")
    if a.save:
        suffix = (f"_search{a.search_evaluations}evals" if a.search_evaluations
                  else f"_search{a.search_seconds:g}s" if a.search_seconds else "")
        suffix += f"_seed{a.seed}" if a.seed else ""
        say(f"wrote {save_results('recompute_table' + suffix, out.getvalue())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
