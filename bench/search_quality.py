"""Search quality on small graphs whose optimum is known: the GA against random sampling.

Issue 14's study. Each graph is a random training graph of 8-14 operators built through our
autodiff (a random forward DAG of elementwise products with parameters, sums, ReLUs and
concatenations, reading any earlier activation, so activations live long and parameters are
shared between operators; then its backward pass and SGD updates) with between
``MIN_ORDERS`` and ``MAX_ORDERS`` topological orders. Its budget is smallest + 0.3 x (unlimited
peak - smallest), so swapping is forced, and its link is slow enough that moving every
tensor once costs as much as the whole compute (``study_profile``).

The optimum is enumerated: every topological order x every allocation on the grid (every
valid CLS, every count from the class minimum to the class's peak demand, within the pool),
planned and simulated by the swapadvisor policy as the search's fitness does. Then for each
seed: the GA (population 40, a quarter of each generation's newcomers random immigrants,
the rest the search's defaults) and random sampling (the search's first generation
alone: the same seeds, default order and updates-first, then random individuals) get the
same number of evaluations; gap = best time / optimum.

    python -m bench.search_quality [--graphs 21] [--seeds 3] [--evaluations 1000] [--save]
"""
from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from dataclasses import dataclass

import numpy as np
from tabulate import tabulate

from allocator import Allocation
from engine.autodiff import SGD, build_training_graph
from engine.ir import Graph
from engine.profile import Link, Profile, Rates
from ga.context import GraphContext
from ga.fitness import Evaluator
from ga.search import SearchOptions, search
from planner.allocation import simple_allocation
from planner.budget import Budget, make_budget
from planner.facts import GraphFacts

from .results_file import cpu_name, save_results

MIN_NODES, MAX_NODES = 8, 14
MIN_ORDERS, MAX_ORDERS = 200, 3000     # at least 200 (the issue); at most what enumerates in seconds
BUDGET_FRACTION = 0.3                  # of the way from the smallest budget to the unlimited peak
GA_POPULATION = 40                     # 40 + 24 generations x 40 children = 1000 evaluations
# Times closer than this (relative) are the same plan to within a few nanoseconds (e.g. where a
# 4 ns fill sits): they count as ties and as "at optimum".
TIE = 1e-5


# ----------------------------------------------------------------------------- graphs
def random_graph(rng: np.random.Generator, name: str) -> Graph:
    """A random forward DAG through autodiff (may raise if a parameter does not reach the loss)."""
    g = Graph(name)
    batch, width = int(rng.choice([4, 8])), int(rng.choice([16, 32]))
    acts = [g.input("x", (batch, width))]
    params: dict[tuple, list[int]] = {}

    def parameter(shape: tuple) -> int:
        if shape not in params or rng.random() < 0.3:     # mostly shared, sometimes a new one
            params.setdefault(shape, []).append(g.parameter(f"w{sum(map(len, params.values()))}", shape))
        choices = params[shape]
        return choices[int(rng.integers(len(choices)))]

    for _ in range(int(rng.integers(2, 5))):
        kind = str(rng.choice(["mul", "mul", "add", "relu", "concat"]))
        a = acts[int(rng.integers(len(acts)))]             # any earlier activation: long lifetimes
        shape = g.shape(a)
        if kind == "mul":
            y = g.apply("mul", [a, parameter(shape)])[0]
        elif kind == "add":
            same = [t for t in acts if g.shape(t) == shape and t != a]
            y = g.apply("add", [a, same[int(rng.integers(len(same)))] if same else parameter(shape)])[0]
        elif kind == "concat":
            rows = [t for t in acts if g.shape(t)[0] == shape[0]]
            y = g.apply("concat", [a, rows[int(rng.integers(len(rows)))]], axis=1)[0]
        else:
            y = g.apply(kind, [a])[0]
        acts.append(y)
    loss = g.apply("softmax_cross_entropy", [acts[-1], g.label("y", (batch,))])[0]
    return build_training_graph(g, loss, SGD(0.05, 0.9))


def count_orders(g: Graph, cap: int = 10**9) -> int:
    """The number of topological orders (dynamic programming over sets of scheduled nodes)."""
    n = len(g.nodes)
    needs = [sum(1 << u for u in g.predecessors(v)) for v in range(n)]
    ways = {0: 1}
    for _ in range(n):
        nxt: dict[int, int] = {}
        for done, w in ways.items():
            for v in range(n):
                if not done >> v & 1 and needs[v] & done == needs[v]:
                    nxt[done | 1 << v] = min(cap, nxt.get(done | 1 << v, 0) + w)
        ways = nxt
    return sum(ways.values())


def topological_orders(g: Graph):
    """Every topological order of ``g``, each a list of node ids."""
    n = len(g.nodes)
    preds = [set(g.predecessors(v)) for v in range(n)]
    order: list[int] = []
    placed = [False] * n

    def extend():
        if len(order) == n:
            yield list(order)
            return
        for v in range(n):
            if not placed[v] and all(placed[u] for u in preds[v]):
                placed[v] = True
                order.append(v)
                yield from extend()
                order.pop()
                placed[v] = False
    yield from extend()


def study_graphs(count: int, seed: int = 0) -> list[Graph]:
    """``count`` random graphs with MIN_NODES..MAX_NODES nodes and MIN_ORDERS..MAX_ORDERS orders,
    each of which forces swapping at the study's budget."""
    rng = np.random.default_rng(seed)
    graphs: list[Graph] = []
    tries = 0
    while len(graphs) < count:
        tries += 1
        if tries > 100_000:
            raise RuntimeError(f"found only {len(graphs)} study graphs in {tries} tries")
        try:
            g = random_graph(rng, f"random-{len(graphs)}")
        except Exception:       # a parameter that does not reach the loss: draw again
            continue
        if not MIN_NODES <= len(g.nodes) <= MAX_NODES or not MIN_ORDERS <= count_orders(g) <= MAX_ORDERS:
            continue
        facts = GraphFacts(g)
        if facts.smallest_budget >= facts.peak_bytes:     # nothing to swap
            continue
        graphs.append(g)
    return graphs


# ----------------------------------------------------------------------------- setting
def study_profile(g: Graph) -> Profile:
    """Roofline rates with no launch cost (tiny tensors would be all launch) and a link at which
    moving every tensor of the graph once takes as long as all of its compute."""
    rates = Rates(flops_per_s=1e9, bytes_per_s=1e9, launch_s=0.0)
    compute = float(Profile("study", Link(1.0, 1.0, 1.0), rates).node_seconds(g).sum())
    rate = sum(t.nbytes for t in g.tensors) / compute
    return Profile("study", Link(rate, rate, rate * 20 / 12, latency_s=0.0), rates)


# The study's search space is the paper's (a schedule and a size-class allocation, which the
# optimum enumerates), so every plan in it is on the pool, not swapadvisor's default auto.
def study_setup(g: Graph) -> tuple[GraphFacts, Budget, Profile]:
    facts = GraphFacts(g)
    smallest, peak = facts.smallest_budget, facts.peak_bytes
    return facts, make_budget(facts, int(smallest + BUDGET_FRACTION * (peak - smallest))), study_profile(g)


def grid_allocations(ctx: GraphContext, pool_bytes: int) -> list[Allocation]:
    """Every valid CLS, with every count vector from the class minima to the class peaks that
    fits the pool (more objects than a class's peak demand are never used)."""
    found = []
    for steps in itertools.product((0, 1), repeat=max(ctx.num_sizes - 1, 0)):
        cls = np.concatenate(([0], np.cumsum(steps))).astype(np.int64)
        lo, hi = ctx.class_minima(cls), np.maximum(ctx.class_peaks(cls), ctx.class_minima(cls))
        for cnt in itertools.product(*(range(a, b + 1) for a, b in zip(lo, hi))):
            alloc = Allocation(ctx.sizes, cls, np.asarray(cnt, dtype=np.int64))
            if alloc.pool_bytes <= pool_bytes:
                found.append(alloc)
    return found


@dataclass
class Optimum:
    time: float
    orders: int
    allocations: int
    seconds: float


def enumerate_optimum(g: Graph) -> Optimum:
    facts, budget, profile = study_setup(g)
    evaluator = Evaluator(facts, profile, budget, allocator="pool")
    allocs = grid_allocations(GraphContext.from_facts(facts), budget.pool_bytes)
    started = time.perf_counter()
    best, orders = float("inf"), 0
    for order in topological_orders(g):
        orders += 1
        for alloc in allocs:
            best = min(best, evaluator.time(order, alloc))
    return Optimum(best, orders, len(allocs), time.perf_counter() - started)


def searched(g: Graph, seed: int, evaluations: int, random_only: bool,
             immigrants: float = 0.0) -> tuple[float, int]:
    """(best time, evaluations done): the GA, or random sampling with the same first generation."""
    facts, budget, profile = study_setup(g)
    if random_only:
        opts = SearchOptions(population=evaluations, max_generations=0, seed=seed, workers=1, allocator="pool",
                             progress=False, ideal=False, polish=False)
    else:
        opts = SearchOptions(population=GA_POPULATION, max_evaluations=evaluations, max_generations=10**6,
                             allocator="pool", immigrants=immigrants, seed=seed, workers=1, progress=False, ideal=False,
                             polish=False)     # equal evaluations: the knob polish would add some
    result = search(facts, budget, profile, opts)
    return result.best_time, result.evaluations


# ----------------------------------------------------------------------------- the study
def summarize(gaps: list[float]) -> list[str]:
    at = sum(1 for x in gaps if x <= 1 + TIE) / len(gaps)
    return [f"{statistics.median(gaps):.4f}", f"{statistics.fmean(gaps):.4f}", f"{max(gaps):.4f}", f"{at:.0%}"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.search_quality", description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", type=int, default=21)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--evaluations", type=int, default=1000)
    ap.add_argument("--graph-seed", type=int, default=0, help="seed of the random graphs")
    ap.add_argument("--immigrants", type=float, default=0.25,
                    help="the GA's fraction of random newcomers per generation (SearchOptions.immigrants)")
    ap.add_argument("--save", action="store_true", help="also write bench/results/search_quality_<date>.txt")
    args = ap.parse_args(argv)
    lines: list[str] = []

    def say(line: str = "") -> None:
        print(line, flush=True)
        lines.append(line)

    say(f"search quality: {args.graphs} random graphs ({MIN_NODES}-{MAX_NODES} operators, "
        f"{MIN_ORDERS}-{MAX_ORDERS} topological orders), {args.seeds} seeds, {args.evaluations} evaluations "
        f"each; budget smallest + {BUDGET_FRACTION} x (peak - smallest); GA population {GA_POPULATION}, "
        f"immigrants {args.immigrants:g}, other settings the search's defaults; {cpu_name()}, "
        f"{time.strftime('%Y-%m-%d')}")
    say("optimum: every topological order x every allocation on the grid (study docstring); "
        f"gap = best time / optimum; times within {TIE:g} (relative) are ties")
    say()
    rows, ga_gaps, rnd_gaps, default_gaps = [], [], [], []
    wins = losses = ties = 0
    for g in study_graphs(args.graphs, args.graph_seed):
        opt = enumerate_optimum(g)
        facts, budget, profile = study_setup(g)
        evaluator = Evaluator(facts, profile, budget, allocator="pool")
        default = evaluator.time(facts.order, simple_allocation(facts, budget, profile, evaluator.node_seconds))
        default_gaps.append(default / opt.time)
        cells = []
        for seed in range(args.seeds):
            ga, _ = searched(g, seed, args.evaluations, random_only=False, immigrants=args.immigrants)
            rnd, _ = searched(g, seed, args.evaluations, random_only=True)
            ga_gaps.append(ga / opt.time)
            rnd_gaps.append(rnd / opt.time)
            if ga < rnd * (1 - TIE):
                wins += 1
            elif rnd < ga * (1 - TIE):
                losses += 1
            else:
                ties += 1
            cells.append(f"{ga / opt.time:.3f}/{rnd / opt.time:.3f}")
        rows.append([g.name, len(g.nodes), opt.orders, opt.allocations, f"{opt.time * 1e6:.2f}",
                     f"{default / opt.time:.3f}", " ".join(cells), f"{opt.seconds:.1f}"])
        print(f"  {g.name}: {rows[-1]}", file=sys.stderr, flush=True)
    say(tabulate(rows, headers=["graph", "ops", "orders", "allocs", "optimum us", "default gap",
                                "GA/random gap per seed", "enumerate s"]))
    say()
    say(tabulate([["default order + simple allocation"] + summarize(default_gaps),
                  [f"GA, {args.evaluations} evaluations"] + summarize(ga_gaps),
                  [f"random sampling, {args.evaluations}"] + summarize(rnd_gaps)],
                 headers=["", "median gap", "mean gap", "worst gap", "at optimum"]))
    runs = len(ga_gaps)
    say()
    say(f"GA against random sampling, same seed and evaluations: GA better in {wins}, random better in "
        f"{losses}, ties {ties} (of {runs} runs)")
    median_ok = statistics.median(ga_gaps) <= 1.005
    mean_ok = statistics.fmean(ga_gaps) < statistics.fmean(rnd_gaps)
    ratio_ok = wins >= 3 * losses and wins >= runs / 4
    say(f"targets: median gap <= 1.005: {'yes' if median_ok else 'no'}; mean gap below random's: "
        f"{'yes' if mean_ok else 'no'}; wins >= 3 x losses and in >= 1/4 of runs: {'yes' if ratio_ok else 'no'}")
    if args.save:
        print(f"saved {save_results('search_quality', chr(10).join(lines) + chr(10))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
