"""SmartSwap (004) against SwapAdvisor on one stream of changing graphs.

The stream (engine.iteration_stream): bucketed sequence lengths drawn per micro-batch,
gradient accumulation of 2 (the update is its own graph), an evaluation every 10 iterations,
one forced non-finite step (its window's update skipped). Four ways to plan it:

- smartswap: the monitor and the plan cache (engine/library/stream_plans.py), a new graph planned
  by the smartswap policy (GenPolicy also tries other C of Eq. 2 and keeps the fastest);
- swapadvisor re-planned: each new graph searched (ga.search, ``--search-seconds`` each);
- swapadvisor once, forced: the first graph's searched plan offered to every iteration, as a
  replaying system would; the gate (fingerprint, then the verifier) refuses it on every other
  graph, which is then re-planned as above (the refusals are counted, nothing runs wrong);
- no swapping: the unlimited plan of each graph whose peak fits the budget.

Simulated on the analytic V100 profile for GPT-2 XL and the 7B-class preset with the budget at
a quarter of the stream's largest peak (004's "4x larger than memory"); then measured on the
cpu backend for gpt-tiny at half of it (a shared 2-core machine: ratios side by side in one
run). Throughput excludes planning. Planning per new graph is what is paid before the graph
can run (smartswap's first plan; SwapAdvisor's search); smartswap's GenPolicy alternatives,
made later while the plan already runs, are reported in the total. Also: Eq. 2's C
measured on the largest micro-step, and 004 Figure 6b's reuse intervals (operators from a
swap-out's issue to the reuse of its bytes) at the simulator's release points against waiting
for the next synchronization.

004 Table 1 (the monitor's overhead): on the cpu backend each way runs both monitoring modes at
the same hook, each timed apart in the same run (engine/op_monitor.py, the low-overhead mode;
engine/detailed_monitor.py, the detailed mode), as a share of the observed iteration's time.
``--table1`` runs only that, for smartswap on gpt-tiny (seconds, not minutes).

    python -m bench.smartswap [--search-seconds 20] [--iterations 60] [--cpu-iterations 120] [--save]
    python -m bench.smartswap --table1 [--cpu-iterations 120] [--cpu-repeats 3] [--save]
"""
from __future__ import annotations

import argparse
import datetime
import os
import time

import numpy as np
from tabulate import tabulate

import zoo
from bench.results_file import Transcript, cpu_name, save_results
from engine import iteration_stream as st
from engine.autodiff import make_optimizer
from engine.backend_registry import choose
from engine.blas_threads import one_blas_thread
from engine.detailed_monitor import KEEP, DetailedMonitor
from engine.library.stream_plans import StalePlanError, StreamPlanner, WindowObserver, admit
from engine.op_monitor import Monitor
from engine.profile import analytic_profile
from engine.training import StreamTrainer
from ga.search import SearchOptions, search
from planner import policy
from planner.budget import make_budget
from planner.facts import GraphFacts
from planner.policies import smartswap as ss
from planner.policy import PlanRequest
from planner.simulate import simulate
from planner.verify import verify

MODELS = {    # name -> (buckets, batch)
    "gpt2-xl": ((512, 768, 1024), 8),
    "gpt-7b": ((1024, 1536, 2048), 4),
}
C_VALUES = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
# 004 Table 1: Llama 2 on one 910B, ms per iteration and the share added
TABLE1_PAPER = (("baseline (no monitor)", 4911.1, None), ("low-overhead mode", 4952.6, 0.009),
                ("detailed mode", 6612.0, 0.346), ("PyTorch's built-in profiler", 15699.7, 2.197))
PAPER = ("004 reports no comparison with SwapAdvisor; its Table 1: the monitor adds 0.9% (low-overhead "
         "mode), 34.6% (detailed) to a 4.91 s iteration; Figure 6b: reuse intervals 3-4x shorter on "
         "average with the simulator's release points, orders of magnitude at the tail")


def settings(buckets) -> st.StreamSettings:
    return st.StreamSettings(buckets, eval_every=10, accumulate=2, nonfinite_at=(7,), seed=0)


def stream_graphs(model: str, buckets, batch: int) -> st.IterationGraphs:
    return st.IterationGraphs(lambda seq: zoo.build(model, batch=batch, size=seq, positions=max(buckets)),
                              make_optimizer(zoo.default_optimizer(model)), 2)


def distinct(stream) -> list:
    seen = {}
    for _, gs in stream:
        for g in gs:
            seen.setdefault(id(g), g)
    return list(seen.values())


class Searched:
    """SwapAdvisor re-planned per new graph: a short search each, its plan verified and simulated."""

    def __init__(self, device_bytes: int, profile, seconds: float, workers: int):
        self.device_bytes, self.profile, self.seconds, self.workers = device_bytes, profile, seconds, workers
        self.plans: dict[int, tuple] = {}      # id(graph) -> (program, simulated s, planning s)

    def plan(self, g):
        got = self.plans.get(id(g))
        if got is None:
            t0 = time.perf_counter()
            facts = GraphFacts(g)
            budget = make_budget(facts, self.device_bytes)
            res = search(facts, budget, self.profile, SearchOptions(time_limit_s=self.seconds, workers=self.workers,
                                                                    population=16, progress=False))
            sa = policy.get("swapadvisor")
            prog = sa.make(res.request(g, facts, budget, self.profile))
            verify(prog, g, budget.device_bytes)
            got = self.plans[id(g)] = (prog, simulate(prog, g, self.profile).total, time.perf_counter() - t0)
        return got


def simulated_comparison(model: str, iterations: int, search_s: float, workers: int, say) -> list:
    buckets, batch = MODELS[model]
    profile = analytic_profile("v100")
    graphs = stream_graphs(model, buckets, batch)
    stream = st.graphs_of(st.IterationPlan(settings(buckets)), graphs, iterations)
    gs = distinct(stream)
    facts = {id(g): GraphFacts(g) for g in gs}
    peak = max(f.peak_bytes for f in facts.values())
    device = peak // 4
    say(f"\n## {model}: buckets {buckets}, batch {batch}, {iterations} iterations, {len(gs)} distinct graphs; "
        f"largest peak {peak / 2**30:.1f} GiB, budget {device / 2**30:.2f} GiB (1/4)")
    ideal = {id(g): simulate(policy.unlimited_program(g, facts[id(g)]), g, profile).total for g in gs}
    ideal_total = sum(ideal[id(g)] for _, run in stream for g in run)

    # smartswap with its monitor
    mon = Monitor()
    sp = StreamPlanner("smartswap", device, profile, monitor=mon)
    observe = WindowObserver(mon)
    total = 0.0
    for s, run in stream:
        for g in run:
            total += sp.plan(g).seconds
        observe(s.iteration, run, 0.0, s)
    ours_peak = max(e.program.arena.arena_bytes for e in sp.cache.entries.values())
    first = sum(t for _, t in sp.plan_seconds)
    tuned = sum(t for _, t in sp.tune_seconds)
    smart = dict(total=total, plan=first + tuned, per_graph=first / len(sp.plan_seconds), tuned=tuned,
                 tuned_graphs=len(sp.tune_seconds), peak=ours_peak, fallbacks=sp.fallbacks,
                 hits=sp.cache.hits, misses=sp.cache.misses)

    # SwapAdvisor re-planned per new graph
    sa = Searched(device, profile, search_s, workers)
    total_sa = sum(sa.plan(g)[1] for _, run in stream for g in run)
    plan_sa = sum(p[2] for p in sa.plans.values())
    peak_sa = max(p[0].arena.arena_bytes for p in sa.plans.values())

    # SwapAdvisor once, forced on every iteration: the gate refuses it on other graphs
    first = stream[0][1][0]
    replay, refused = sa.plan(first)[0], 0
    for _, run in stream:
        for g in run:
            try:
                admit(replay, g, device)
            except StalePlanError:
                refused += 1
    offered = sum(len(run) for _, run in stream)

    # No swapping where it fits
    fits = [g for g in gs if facts[id(g)].peak_bytes + facts[id(g)].scratch.bytes <= device]
    rows = [
        ["smartswap + monitor", f"{iterations / smart['total']:.4f}", f"{ideal_total / smart['total']:.3f}",
         f"{smart['per_graph']:.2f}", f"{smart['plan']:.1f}", f"{smart['peak'] / 2**30:.2f}",
         f"0 (cache {smart['misses']} misses, {smart['hits']} hits; {smart['fallbacks']} graphs fell back; "
         f"GenPolicy tried alternatives for {smart['tuned_graphs']} graphs in {smart['tuned']:.1f} s)"],
        ["swapadvisor re-planned", f"{iterations / total_sa:.4f}", f"{ideal_total / total_sa:.3f}",
         f"{plan_sa / len(sa.plans):.2f}", f"{plan_sa:.1f}", f"{peak_sa / 2**30:.2f}", "0"],
        ["swapadvisor once, forced", "refused", "-", "-", "-", "-",
         f"refused {refused} of {offered} graph runs (then re-planned: row above)"],
        ["no swapping", "does not fit" if len(fits) < len(gs) else f"{iterations / ideal_total:.4f}", "-", "0", "0",
         "-", f"{len(fits)} of {len(gs)} graphs fit: {', '.join(g.name for g in fits) or 'none'}"],
        ["ideal (unlimited memory)", f"{iterations / ideal_total:.4f}", "1.000", "0", "0",
         f"{peak / 2**30:.2f}", "-"],
    ]
    say(tabulate(rows, headers=["", "iterations/s", "of ideal", "plan s per new graph (before it runs)",
                                "plan s total (with GenPolicy)", "peak device GiB", "stale plans run"]))
    ratio_tp = total_sa / smart["total"]
    ratio_plan = smart["per_graph"] / (plan_sa / len(sa.plans))
    say(f"smartswap / swapadvisor re-planned: throughput {ratio_tp:.3f} (target >= 0.9), planning per new "
        f"graph {ratio_plan:.3f} (target <= 0.1)")

    # C of Eq. 2 and release points, on the largest micro-step
    g = max((x for x in gs if x.name.endswith("micro")), key=lambda x: facts[id(x)].peak_bytes)
    f = facts[id(g)]
    budget = make_budget(f, device)
    c_rows = []
    for c in C_VALUES:
        try:
            prog = ss.make(PlanRequest(g, f, budget, profile, policy_options={"c": c}))
            c_rows.append([c, f"{simulate(prog, g, profile).total:.3f}"])
        except Exception as e:       # noqa: BLE001  (a C that cannot fit is a row, not a crash)
            c_rows.append([c, f"does not fit ({type(e).__name__})"])
    say(f"\nEq. 2's C on {g.name} (simulated s per iteration; default C = {ss.C_DEFAULT:g}):")
    say(tabulate(c_rows, headers=["C", "iteration s"]))
    o_rows = []
    for order in ("eager", "given"):
        row = [order]
        for placement in ("oldest", "bestfit"):
            try:
                prog = ss.make(PlanRequest(g, f, budget, profile, policy_options={"order": order, "placement": placement}))
                row.append(f"{simulate(prog, g, profile).total:.3f}")
            except Exception as e:       # noqa: BLE001  (as above)
                row.append(f"does not fit ({type(e).__name__})")
        o_rows.append(row)
    say(f"\nOrder and placement on {g.name} (simulated s per iteration; default eager, oldest):")
    say(tabulate(o_rows, headers=["order", "placement oldest", "placement bestfit"]))
    plan = ss.SmartSwapPlan(PlanRequest(g, f, budget, profile))
    plan.make()
    rep = ss.release_report(plan)
    say(f"\nReuse interval (004 Figure 6b) on {g.name}, operators from a swap-out's issue to the reuse of "
        f"its bytes, {len(rep.simulator)} copies out:")
    say(tabulate([["simulator's release points", *_dist(rep.simulator), f"{rep.arena_bytes / 2**30:.2f}"],
                  ["next synchronization", *_dist(rep.at_sync), f"{rep.arena_bytes_at_sync / 2**30:.2f}"]],
                 headers=["", "mean", "p50", "p90", "p99", "max", "pool GiB needed"]))
    return [model, ratio_tp, ratio_plan]


def _dist(x: np.ndarray) -> list[str]:
    if not len(x):
        return ["-"] * 5
    return [f"{x.mean():.1f}", *(f"{np.percentile(x, q):.0f}" for q in (50, 90, 99)), f"{x.max()}"]


CPU_BUCKETS = (8, 12, 16)


def cpu_setting(iterations: int):
    """gpt-tiny's stream on the cpu backend: (settings, budget at half its largest peak)."""
    sets = settings(CPU_BUCKETS)
    probe = stream_graphs("gpt-tiny", CPU_BUCKETS, 8)
    gs = distinct(st.graphs_of(st.IterationPlan(sets), probe, iterations))
    return sets, max(GraphFacts(g).peak_bytes for g in gs) // 2


def measured_run(sp: StreamPlanner, graphs, sets, iterations: int) -> dict:
    """``iterations`` of the stream on ``sp``'s runners with both monitoring modes at the observer:
    iterations/s with planning excluded, first-plan seconds per new graph, and per observed
    iteration (medians: iterations that planned a new graph are outliers) its ms, each mode's
    ms and each mode's share of it."""
    det = DetailedMonitor(sp.program_ran)
    observe = WindowObserver(sp.monitor, det)
    tr = StreamTrainer(graphs, st.IterationPlan(sets), sp.runner_for, after=observe)
    try:
        with one_blas_thread():
            t0 = time.perf_counter()
            for _ in range(iterations):
                tr.step()
            wall = time.perf_counter() - t0
    finally:
        sp.close()
    # Planning excluded: the first plans (SwapAdvisor's searches) and GenPolicy's alternatives,
    # which run inside the loop here (a real system would run them beside it).
    plan_s = sum(s for _, s in sp.plan_seconds) + sum(s for _, s in sp.tune_seconds)
    w = np.array([(s, a, b) for _, s, a, b in observe.windows])
    first = sum(s for _, s in sp.plan_seconds) / max(1, len(sp.plan_seconds))
    return dict(rate=iterations / (wall - plan_s), first=first,
                window_s=np.median(w[:, 0]), simple_s=np.median(w[:, 1]), detailed_s=np.median(w[:, 2]),
                simple=np.median(w[:, 1] / w[:, 0]), detailed=np.median(w[:, 2] / w[:, 0]),
                operators=float(np.median([r.operators for r in det.records])), windows=len(w))


def cpu_comparison(iterations: int, search_s: float, workers: int, say, repeats: int = 3) -> list:
    """gpt-tiny on the cpu backend at half the stream's largest peak: wall seconds per iteration,
    the three ways run ``repeats`` times in turn (a shared machine: the median of the repeats).
    Returns the targets' row: [name, throughput ratio, planning-per-graph ratio]."""
    profile = analytic_profile("v100")
    placement = choose("cpu")
    sets, device = cpu_setting(iterations)
    say(f"\n## gpt-tiny on the cpu backend (measured; {cpu_name()}, {os.cpu_count()} cores, one BLAS thread): "
        f"buckets {CPU_BUCKETS}, {iterations} iterations, budget {device} B (1/2 of the largest peak); the three "
        f"run in turn {repeats} times, medians (and the range of iterations/s); both monitoring modes at the "
        f"observer, each timed apart, as a share of the observed iteration (an optimizer step or an evaluation)")

    class Replanned(StreamPlanner):       # SwapAdvisor's searched plan for each new graph, same gate and runners
        def _plan(self, g, pol, **options):
            prog = searcher.plan(g)[0]
            from engine.library.stream_plans import Entry
            return Entry(g, prog, 0.0, "swapadvisor", tuned=True)

    searcher = Searched(device, profile, search_s, workers)
    ways = {"smartswap + monitor": lambda mon: StreamPlanner("smartswap", device, profile, placement, monitor=mon),
            "swapadvisor re-planned": lambda mon: Replanned("swapadvisor", device, profile, placement, monitor=mon),
            "ideal (unlimited memory)": lambda mon: StreamPlanner("ideal", 1 << 40, profile, placement, monitor=mon)}
    graphs = {name: stream_graphs("gpt-tiny", CPU_BUCKETS, 8) for name in ways}   # SwapAdvisor searches each once
    runs: dict[str, list] = {name: [] for name in ways}
    for _ in range(repeats):
        for name, make in ways.items():
            runs[name].append(measured_run(make(Monitor()), graphs[name], sets, iterations))
    rows = []
    for name, rs in runs.items():
        med = {k: np.median([r[k] for r in rs]) for k in ("rate", "window_s", "simple_s", "simple", "detailed")}
        rates = [r["rate"] for r in rs]
        rows.append([name, f"{med['rate']:.1f} ({min(rates):.1f}-{max(rates):.1f})", f"{rs[0]['first']:.3f}",
                     f"{1e3 * med['window_s']:.2f}", f"{1e3 * med['simple_s']:.3f}", f"{100 * med['simple']:.2f}%",
                     f"{100 * med['detailed']:.1f}%"])
    say(tabulate(rows, headers=["", "iterations/s (planning excluded)", "plan s per new graph (first run)",
                                "median observed iteration ms", "median monitor ms", "monitor overhead",
                                "detailed mode overhead"]))
    ours, theirs = (runs[k] for k in ("smartswap + monitor", "swapadvisor re-planned"))
    ratio_tp = np.median([r["rate"] for r in ours]) / np.median([r["rate"] for r in theirs])
    ratio_plan = ours[0]["first"] / theirs[0]["first"]
    say(f"smartswap / swapadvisor re-planned, measured: throughput {ratio_tp:.3f} (target >= 0.9), planning per "
        f"new graph {ratio_plan:.3f} (target <= 0.1)")
    table1_rows(ours, say)
    return ["gpt-tiny (cpu, measured)", ratio_tp, ratio_plan]


def table1_rows(rs: list[dict], say) -> None:
    """004 Table 1 beside ours (smartswap's runs of ``measured_run``: medians over the repeats)."""
    med = {k: float(np.median([r[k] for r in rs]))
           for k in ("window_s", "simple_s", "detailed_s", "simple", "detailed")}
    ours = {"baseline (no monitor)": (med["window_s"], None),
            "low-overhead mode": (med["window_s"] + med["simple_s"], med["simple"]),
            "detailed mode": (med["window_s"] + med["detailed_s"], med["detailed"]),
            "PyTorch's built-in profiler": (None, None)}
    rows = [[name, f"{ms:,.1f}", "/" if share is None else f"{100 * share:.1f}%",
             "not run" if ours[name][0] is None else f"{1e3 * ours[name][0]:.3f}",
             "/" if ours[name][1] is None else f"{100 * ours[name][1]:.2f}%"]
            for name, ms, share in TABLE1_PAPER]
    say(f"\n004 Table 1 (the monitor's overhead): the paper's Llama 2 on a 910B beside smartswap's gpt-tiny stream "
        f"here (median {rs[0]['operators']:.0f} operators in the last {KEEP} observed iterations; medians over observed "
        f"iterations and "
        f"{len(rs)} runs; ours adds each mode's own time to the iteration, both timed in the same run)")
    say(tabulate(rows, headers=["", "paper ms", "paper extra", "ours ms", "ours extra"], disable_numparse=True))
    ratio = med["detailed"] / med["simple"] if med["simple"] else float("inf")
    say(f"detailed over low-overhead mode: paper {0.346 / 0.009:.0f}x, ours {ratio:.0f}x; the detailed mode below "
        f"the profiler's 219.7%: {'yes' if med['detailed'] < 2.197 else 'no'}")


def table1(iterations: int, repeats: int, say) -> None:
    """``--table1``: only smartswap's measured runs, for 004 Table 1."""
    sets, device = cpu_setting(iterations)
    say(f"\n## gpt-tiny on the cpu backend (measured; {cpu_name()}, {os.cpu_count()} cores, one BLAS thread): "
        f"smartswap, buckets {CPU_BUCKETS}, {iterations} iterations, budget {device} B (1/2 of the largest peak), "
        f"{repeats} runs")
    before = os.getloadavg()[0]
    runs = [measured_run(StreamPlanner("smartswap", device, analytic_profile("v100"), choose("cpu"), monitor=Monitor()),
                         stream_graphs("gpt-tiny", CPU_BUCKETS, 8), sets, iterations) for _ in range(repeats)]
    say(f"load average (1 min) before {before:.2f}, after {os.getloadavg()[0]:.2f} (a shared machine: each mode's "
        "share is timed inside the same iterations, so load slows both sides)")
    table1_rows(runs, say)


def at_least(low: int):
    """An argparse type: an integer no less than ``low`` (benches do not import the command line's
    engine/cli/flag_types, tests/test_architecture.py)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is below {low}")
        return value
    return parse


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.smartswap", description=__doc__.splitlines()[0])
    ap.add_argument("--search-seconds", type=float, default=20.0, help="SwapAdvisor's search per new graph")
    ap.add_argument("--iterations", type=int, default=60, help="simulated stream length")
    ap.add_argument("--cpu-iterations", type=at_least(2), default=120,
                    help="(an observed iteration ends every 2)")
    ap.add_argument("--cpu-repeats", type=at_least(1), default=3,
                    help="times the cpu comparison runs each way, in turn")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--table1", action="store_true",
                    help="only 004 Table 1: both monitoring modes' overhead, measured on smartswap's cpu run")
    ap.add_argument("--save", action="store_true",
                    help="write bench/results/smartswap_<date>.txt (with --table1: smartswap_table1_<date>.txt)")
    args = ap.parse_args(argv)
    say = Transcript()

    if args.table1:
        say(f"# SmartSwap's monitor overhead (004 Table 1), {datetime.datetime.now():%Y-%m-%d %H:%M}, {cpu_name()}, "
            f"{os.cpu_count()} cores")
        table1(args.cpu_iterations, args.cpu_repeats, say)
        if args.save:
            print("saved", save_results("smartswap_table1", say.text()))
        return 0
    say(f"# SmartSwap vs SwapAdvisor on a changing-graph stream, {datetime.datetime.now():%Y-%m-%d %H:%M}, "
        f"{cpu_name()}; SwapAdvisor searched {args.search_seconds:g} s per new graph on {args.workers} workers")
    say(f"# paper: {PAPER}")
    summary = [simulated_comparison(m, args.iterations, args.search_seconds, args.workers, say)
               for m in args.models.split(",") if m]
    summary.append(cpu_comparison(args.cpu_iterations, min(args.search_seconds, 5.0), args.workers, say,
                                  args.cpu_repeats))
    say("\n## targets")
    say(tabulate([[m, f"{a:.3f}", "yes" if a >= 0.9 else "no", f"{b:.3f}", "yes" if b <= 0.1 else "no"]
                  for m, a, b in summary],
                 headers=["model", "throughput vs re-planned", ">= 0.9", "planning per graph vs re-planned", "<= 0.1"]))
    if args.save:
        print("saved", save_results("smartswap", say.text()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
