"""The genetic search on the paper's Table 1 models: SwapAdvisor's Figure 6 and Figure 10, simulated.

For each model at the paper's configuration (zoo.stats.PAPER), on the analytic V100 profile
with a 16 GiB budget: the ideal time (unlimited memory), ODSwap (default order, simple
allocation, LRU eviction), the unsearched SwapAdvisor plan (default order, simple
allocation, Belady), and the genetic search for a fixed number of seconds, each as a
fraction of ideal throughput (ideal time / time) beside the paper's Figure 6 numbers. Then
the ablation of Figure 10 for the RNN and Inception: schedule-only, allocation-only, joint.
ODSwap, the unsearched plan and the allocation-only search also run on MXNet's default order
(engine.schedules.mxnet_order), the order the paper's baselines ran in: on an unrolled RNN it
interleaves the layers, where our insertion order runs them one after another.

The paper searches 30 minutes with 144 individuals on 72 cores. Here each search gets
``--seconds`` on this machine's cores, so the population is chosen from the measured time of
one plan + simulate (``--population auto``): about ``workers * seconds / per-candidate``
evaluations fit, and the population is an eighth of that (4..144), so that several
generations run. The defaults fit the nine searches in about 10 minutes on 2 cores.

    python -m bench.ga_search [--seconds 50] [--population auto] [--workers N] [--save]
"""
from __future__ import annotations

import argparse
import datetime
import math
import sys
import time

from tabulate import tabulate

import zoo
from bench.results_file import Transcript, save_results
from engine.profile import analytic_profile
from engine.schedules import mxnet_order
from ga.fitness import Evaluator
from ga.search import SearchOptions, search
from ga.workers import default_workers
from planner import policy
from planner.allocation import simple_allocation
from planner.bounds import lower_bounds
from planner.budget import make_budget
from planner.errors import PlanError
from planner.facts import GraphFacts
from planner.simulate import simulate
from zoo.stats import PAPER

# Figure 6 at the largest batch (the text's numbers; the bars themselves are not in our copy).
# SwapAdvisor and ODSwap throughput as a fraction of ideal.
PAPER_FIG6 = {
    "wresnet-152-10": ("0.95", "0.80"),
    "inception-4": ("<=0.65 (text)", "? (SA 1.2-2.5x better)"),
    "nasnet-25": ("0.53", "? (SA 1.2-2.5x better)"),
    "rnn-8-8k": ("0.70-0.80 (text)", "<0.01"),
    "brnn-4-8k": ("0.70-0.80 (text)", "<0.01"),
}
# Figure 10: throughput of the allocation-only search relative to the joint search.
PAPER_FIG10_ALLOCATION_ONLY = {"rnn-8-8k": "0.07", "inception-4": "0.93"}
ABLATION_MODELS = ("rnn-8-8k", "inception-4")


def simulated(g, program, profile, secs) -> float:
    return float(simulate(program, g, profile, secs).total)


def fraction(ideal: float, t: float | None) -> str:
    if t is None or not math.isfinite(t):
        return "n/a"
    return f"{ideal / t:.3f}"


def times_bound(t: float | None, bound: float | None) -> str:
    """Seconds over the lower bound for the order and budget (planner.bounds)."""
    if t is None or bound is None or not math.isfinite(t):
        return "n/a"
    return f"{t / bound:.2f}"


def seconds(t: float | None) -> str:
    return "n/a" if t is None or not math.isfinite(t) else f"{t:.3f}"


def auto_population(per_candidate_s: float, workers: int, budget_s: float) -> int:
    evaluations = workers * budget_s / max(per_candidate_s, 1e-3)
    return int(min(144, max(4, 4 * (evaluations // 8 // 4))))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ga_search", description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=50, help="search time per model and mode (default 50)")
    ap.add_argument("--population", default="auto", help="Np, or 'auto' from the per-candidate time")
    ap.add_argument("--workers", type=int, default=None, help="processes (default: all cores)")
    ap.add_argument("--mutation", type=float, default=0.1)
    ap.add_argument("--schedule-mutation", type=float, default=None, help="P for schedule steps alone "
                    "(default: the search's, P but at most 150 random picks per child)")
    ap.add_argument("--elite", type=int, default=None, help="fastest individuals kept every generation "
                    "(default: the search's, 2)")
    ap.add_argument("--temperature", type=float, default=None, help="divides Eq. 1's t_norm (default: the "
                    "search's, 0.02)")
    ap.add_argument("--paper-selection", action="store_true", help="Eq. 1 as printed: temperature 1, no elite")
    ap.add_argument("--random-only", action="store_true", help="an all-random first generation (the paper's "
                    "setting), no seeds")
    ap.add_argument("--locality", type=float, default=None, help="probability a schedule child also gets the "
                    "locality mutation (default: the search's, 0.2; 0: off)")
    ap.add_argument("--knobs", choices=("on", "off"), default=None, help="search the policy's knobs (swapadvisor's "
                    "headroom) as genes (default: the search's)")
    ap.add_argument("--segment", type=float, default=None, help="probability a schedule crossover takes a random "
                    "stretch of the other parent instead of Figure 4's prefix (default: the search's, 0)")
    ap.add_argument("--transfer", type=float, default=None, help="probability an allocation child also trades "
                    "objects between two classes (default: the search's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget-gib", type=float, default=16)
    ap.add_argument("--models", default=",".join(p.model for p in PAPER))
    ap.add_argument("--ablation", default=",".join(ABLATION_MODELS),
                    help="models for the schedule-only / allocation-only runs ('' for none)")
    ap.add_argument("--save", action="store_true", help="also write bench/results/ga_search_<date>.txt")
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)
    workers = args.workers or default_workers()
    profile = analytic_profile("v100")
    device_bytes = int(args.budget_gib * 2**30)
    papers = {p.model: p for p in PAPER}
    unknown = [m for m in args.models.split(",") if m not in papers]
    if unknown:
        ap.error(f"unknown model {unknown[0]}; choose from {', '.join(papers)}")
    ablation = [m for m in args.ablation.split(",") if m]
    if args.paper_selection:
        given_options = {"temperature": 1.0, "elite": 0}
    else:
        given_options = {k: v for k, v in (("temperature", args.temperature), ("elite", args.elite))
                             if v is not None}
    if args.locality is not None:
        given_options["locality"] = args.locality
    if args.knobs is not None:
        given_options["knobs"] = args.knobs == "on"
    if args.segment is not None:
        given_options["segment"] = args.segment
    if args.transfer is not None:
        given_options["transfer"] = args.transfer
    probe = SearchOptions(**given_options)
    selection = (f"selection: temperature {probe.temperature:g}, elite {probe.elites}, "
                 f"locality mutation {probe.locality:g}, knobs {'searched' if probe.knobs else 'default'}, "
                 f"segment crossover {probe.segment:g}, transfer {probe.transfer:g}, "
                 + ("all-random first generation" if args.random_only else "seeded first generation"))
    started = time.perf_counter()
    say = Transcript()

    say(f"# SwapAdvisor genetic search, simulated: analytic V100 profile, {args.budget_gib:g} GiB budget, "
        f"{args.seconds:g} s per search on {workers} worker process(es), seed {args.seed}, "
        f"mutation {args.mutation}, {selection}, {datetime.datetime.now():%Y-%m-%d %H:%M}")
    main_rows, speed_rows, ablation_rows, histories = [], [], [], []
    for name in args.models.split(","):
        paper = papers[name]
        t0 = time.perf_counter()
        g = zoo.build(name, batch=paper.batch)
        facts = GraphFacts(g)
        secs = profile.node_seconds(g)
        ideal = simulated(g, policy.unlimited_program(g, facts), profile, secs)
        try:
            budget = make_budget(facts, device_bytes)
        except PlanError as e:
            say(f"{paper.label}: {e}")
            budget = None
        odswap = unsearched = default_bound = None
        per_candidate = math.nan
        mx_facts = GraphFacts(g, mxnet_order(g))
        try:
            mx_budget = make_budget(mx_facts, device_bytes)
        except PlanError:
            mx_budget = None
        mx_odswap = mx_unsearched = None
        if mx_budget is not None:
            try:
                mx_odswap = simulated(g, policy.get("odswap").make(policy.PlanRequest(
                    g, mx_facts, mx_budget, profile, secs, allocator="pool")), profile, secs)
                mx_unsearched = Evaluator(mx_facts, profile, mx_budget, node_seconds=secs).time(
                    mx_facts.order, simple_allocation(mx_facts, mx_budget, profile, secs))
            except PlanError:
                pass
        if budget is not None:
            default_bound = lower_bounds(facts, budget, profile, secs).bound
            try:
                request = policy.PlanRequest(g, facts, budget, profile, secs, allocator="pool")
                odswap = simulated(g, policy.get("odswap").make(request), profile, secs)
            except PlanError:
                pass
            evaluator = Evaluator(facts, profile, budget, node_seconds=secs)
            try:
                simple = simple_allocation(facts, budget, profile, secs)     # as the policy and the search do
                t1 = time.perf_counter()
                unsearched = evaluator.time(g.default_order(), simple)
                per_candidate = time.perf_counter() - t1
            except PlanError:
                pass
        if args.population == "auto":
            population = auto_population(per_candidate if math.isfinite(per_candidate) else 1.0,
                                         workers, args.seconds)
        else:
            population = int(args.population)
        setup = time.perf_counter() - t0
        speed_row = [paper.label, len(g.nodes), f"{per_candidate:.2f}", population, f"{setup:.1f}"]

        results = {}
        for mode in ["both"] + (["schedule", "allocation", "allocation, MXNet order"] if name in ablation else []):
            opts = SearchOptions(population=population, mutation=args.mutation,
                                 schedule_mutation=args.schedule_mutation, seeded=not args.random_only,
                                 seed=args.seed,
                                 workers=workers, time_limit_s=args.seconds, mode=mode.partition(",")[0],
                                 **given_options, progress=not args.quiet, ideal=False)
            on_mxnet = mode.endswith("MXNet order")
            if (mx_budget if on_mxnet else budget) is None:
                results[mode] = None
                continue
            try:
                results[mode] = (search(mx_facts, mx_budget, profile, opts) if on_mxnet
                                 else search(facts, budget, profile, opts))
            except (PlanError, ValueError) as e:
                say(f"{paper.label} {mode}: {e}")
                results[mode] = None
        joint = results["both"]
        speed_rows.append(speed_row + ([f"{joint.elapsed_s * workers / max(joint.evaluations, 1):.2f}"]
                                       if joint else ["n/a"]))
        best = joint.best_time if joint else None
        best_bound = (lower_bounds(GraphFacts(g, joint.best_schedule), budget, profile, secs).bound
                      if joint and joint.best_schedule is not None else None)
        sa_paper, od_paper = PAPER_FIG6[name]
        main_rows.append([paper.label, seconds(ideal), seconds(default_bound), seconds(odswap),
                          fraction(ideal, odswap), times_bound(odswap, default_bound), fraction(ideal, mx_odswap),
                          od_paper,
                          seconds(unsearched), fraction(ideal, unsearched), times_bound(unsearched, default_bound),
                          fraction(ideal, mx_unsearched),
                          seconds(best), fraction(ideal, best), times_bound(best, best_bound), sa_paper,
                          f"{joint.generations}/{joint.evaluations}" if joint else "n/a"])
        if joint:
            histories.append((paper.label, joint))
        if name in ablation:
            row = [paper.label]
            for mode in ("schedule", "allocation", "allocation, MXNet order", "both"):
                r = results.get(mode)
                row += [seconds(r.best_time if r else None), fraction(ideal, r.best_time if r else None)]
            for mode in ("allocation", "allocation, MXNet order"):
                alloc_only = results.get(mode)
                row.append(f"{best / alloc_only.best_time:.2f}" if alloc_only and best and
                           math.isfinite(alloc_only.best_time) else "n/a")
            row.append(PAPER_FIG10_ALLOCATION_ONLY.get(name, "?"))
            ablation_rows.append(row)
        print(f"  [{paper.label} done, {time.perf_counter() - started:.0f} s so far]", file=sys.stderr)

    say()
    say("Figure 6: seconds per iteration (simulated) and throughput as a fraction of ideal")
    say(tabulate(main_rows, headers=["model", "ideal s", "bound s", "odswap s", "odswap frac", "x bound",
                                     "odswap frac, MXNet order", "paper odswap", "unsearched s", "unsearched frac",
                                     "x bound", "unsearched frac, MXNet order", "search s",
                                     "search frac", "x bound", "paper SA frac", "gens/evals"],
                 disable_numparse=True))
    say("unsearched: SwapAdvisor planner on the default order and the simple allocation (the search's "
        "individual 0). bound: the lower bound on the default order under the budget (planner.bounds); "
        "x bound: seconds over the bound of the plan's order (the search's: its best order's). "
        "MXNet order: the same plan on engine.schedules.mxnet_order, the order the paper's baselines ran in "
        "(the columns without it: our insertion order).")
    say()
    say("Per-candidate cost (one plan + simulate, default order and simple allocation) and the population used")
    say(tabulate(speed_rows, headers=["model", "nodes", "plan+simulate s", "population", "setup s",
                                      "search s/candidate/worker"],
                 disable_numparse=True))
    if ablation_rows:
        say()
        say(f"Figure 10: search with one half fixed ({args.seconds:g} s each); seconds per iteration and "
            "fraction of ideal")
        say(tabulate(ablation_rows, headers=["model", "schedule-only s", "frac", "allocation-only s", "frac",
                                             "alloc-only, MXNet order s", "frac", "joint s", "frac",
                                             "alloc-only/joint thr.", "MXNet order", "paper"],
                     disable_numparse=True))
        say("schedule-only: the simple allocation is kept; allocation-only: our default (insertion) order is "
            "kept; MXNet order: allocation-only on engine.schedules.mxnet_order (the paper's default order); "
            "paper: Figure 10's allocation-only throughput relative to the joint search.")
    say()
    say("Search progress (best alive, seconds per iteration, at elapsed search seconds)")
    for label, r in histories:
        points = r.history if len(r.history) <= 8 else [r.history[int(i)] for i in
                                                         sorted({round(k * (len(r.history) - 1) / 7)
                                                                 for k in range(8)})]
        say(f"  {label}: " + ", ".join(f"{h.elapsed_s:.0f}s:{h.best:.3f}" for h in points)
            + f"  (best ever {r.best_time:.3f}, stopped by {r.stopped})")
    say()
    say(f"total {time.perf_counter() - started:.0f} s")
    if args.save:
        print(f"saved {save_results('ga_search', say.text())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
