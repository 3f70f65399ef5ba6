"""A long changing-graph run of gpt-tiny under SmartSwap (issue 18's acceptance run).

1000 iterations on the cpu backend with the sanitizer: bucketed sequence lengths (8, 12, 16)
drawn per micro-batch, gradient accumulation of 2, an evaluation every 50 iterations and one
forced non-finite step (its window's update skipped), at half of the largest graph's unlimited
peak. Checked: every parameter and optimizer state bit-identical to the unlimited run (the
numpy reference on the same stream), the resident set size flat from iteration 100 on (within
2 MiB), and the monitor's stage transitions, logged and plotted against the iteration.

    python -m bench.smartswap_long [--iterations 1000] [--eval-every 50] [--save]
"""
from __future__ import annotations

import argparse
import datetime
import io
import time

import numpy as np

import zoo
from bench.results_file import cpu_name, save_results
from engine import iteration_stream as st
from engine.autodiff import make_optimizer
from engine.backend_registry import choose
from engine.blas_threads import one_blas_thread
from engine.library.stream_plans import StreamPlanner, WindowObserver
from engine.op_monitor import STAGES, Monitor, stages_figure
from engine.profile import analytic_profile
from engine.training import ReferenceRunner, StreamTrainer
from engine.units import format_bytes
from planner.facts import GraphFacts

BUCKETS = (8, 12, 16)
RSS_FROM, RSS_SLACK = 100, 2 * 2**20


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def graphs() -> st.IterationGraphs:
    return st.IterationGraphs(lambda seq: zoo.build("gpt-tiny", size=seq, positions=max(BUCKETS)),
                              make_optimizer("adamw"), 2)


def run(iterations: int = 1000, eval_every: int = 50, nonfinite_at: int = 333, fraction: float = 0.5,
        seed: int = 0, sanitize: bool = True) -> dict:
    settings = st.StreamSettings(BUCKETS, eval_every, 2, (nonfinite_at,), seed)
    probe = graphs()
    peak = max(GraphFacts(g).peak_bytes for _, gs in st.graphs_of(st.IterationPlan(settings), probe, iterations)
               for g in gs)
    device = int(fraction * peak)
    mon = Monitor()
    planner = StreamPlanner("smartswap", device, analytic_profile("v100"), choose("cpu"), sanitize, seed, mon)
    observe = WindowObserver(mon)
    trainer = StreamTrainer(graphs(), st.IterationPlan(settings), planner.runner_for, seed, observe)
    rss = []
    t0 = time.perf_counter()
    try:
        with one_blas_thread():
            for _ in range(iterations):
                trainer.step()
                rss.append(rss_bytes())
    finally:
        planner.close()
    wall = time.perf_counter() - t0
    runners: dict = {}
    reference = StreamTrainer(graphs(), st.IterationPlan(settings), lambda g: runners.setdefault(g, ReferenceRunner(g)),
                              seed)
    for _ in range(iterations):
        reference.step()
    ours, ref = trainer.named_state(), reference.named_state()
    identical = set(ours) == set(ref) and all(np.array_equal(ours[k], ref[k]) for k in ref)
    late = np.array(rss[RSS_FROM:]) if len(rss) > RSS_FROM else np.array(rss)
    return dict(iterations=iterations, eval_every=eval_every, nonfinite_at=nonfinite_at, fraction=fraction,
                device=device, peak=peak, identical=identical, wall=wall,
                updates=trainer.updates, skipped=trainer.skipped, rss=np.array(rss),
                rss_spread=int(late.max() - late.min()) if len(late) else 0, monitor=mon, planner=planner,
                observer=observe, losses=trainer.losses, tensors=len(ref))


def title(result: dict) -> str:
    return (f"SmartSwap's monitor on gpt-tiny, changing graphs (lengths {'/'.join(map(str, BUCKETS))}, "
            f"accumulation 2), cpu backend\nbudget {format_bytes(result['device'])} = {result['fraction']:g} of "
            f"the largest graph's unlimited peak ({format_bytes(result['peak'])})")


def figure(result: dict):
    """The monitor's stage per observed iteration and the resident set size (``run``'s result)."""
    plan = st.IterationPlan(st.StreamSettings(BUCKETS, result["eval_every"], 2, (result["nonfinite_at"],)))
    evaluations = [i for i in range(result["iterations"]) if plan.step(i).kind == st.EVAL]
    return stages_figure(result["monitor"].log, title(result), evaluations, [result["nonfinite_at"]], result["rss"])


def plot(result: dict, path: str) -> bool:
    try:
        fig = figure(result)
    except ImportError:
        return False
    fig.savefig(path)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.smartswap_long", description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--nonfinite-at", type=int, default=333)
    ap.add_argument("--save", action="store_true", help="write bench/results/smartswap_long_<date>.txt and .png")
    args = ap.parse_args(argv)
    r = run(args.iterations, args.eval_every, args.nonfinite_at)
    out = io.StringIO()

    def say(line: str = "") -> None:
        print(line, flush=True)
        out.write(line + "\n")

    sp, mon = r["planner"], r["monitor"]
    say(f"# gpt-tiny, {r['iterations']} iterations on the cpu backend with the sanitizer, buckets {BUCKETS}, "
        f"accumulation 2, evaluation every {args.eval_every}, loss forced non-finite at iteration "
        f"{args.nonfinite_at}; {datetime.datetime.now():%Y-%m-%d %H:%M}, {cpu_name()}")
    say(f"budget {r['device']} B = 0.5 of the largest graph's unlimited peak ({r['peak']} B)")
    say(f"parameters and optimizer state ({r['tensors']} tensors) identical to the unlimited run: "
        f"{'yes' if r['identical'] else 'NO'}")
    say(f"updates {r['updates']}, windows skipped (non-finite) {r['skipped']}, wall {r['wall']:.1f} s")
    say(f"resident set size from iteration {RSS_FROM}: spread {r['rss_spread'] / 2**20:.2f} MiB "
        f"(target <= {RSS_SLACK / 2**20:g}), first {r['rss'][0] / 2**20:.1f} MiB, last {r['rss'][-1] / 2**20:.1f} MiB")
    say(f"plan cache: {sp.cache.misses} misses (graphs planned), {sp.cache.hits} hits; plans made "
        + ", ".join(f"{name} {s:.3f} s" for name, s in sp.plan_seconds))
    it_s = np.array([t for _, t, _ in r["observer"].times])
    mon_s = np.array([m for _, _, m in r["observer"].times])
    say(f"monitor overhead per iteration: median {1e3 * np.median(mon_s):.3f} ms beside a median iteration of "
        f"{1e3 * np.median(it_s):.2f} ms ({100 * np.median(mon_s / it_s):.2f}%; 004 Table 1: 0.9%)")
    say(f"stage transitions ({len(mon.log)} observations, one per optimizer step or evaluation):")
    say("  " + ", ".join(f"{i}:{stage}" for i, stage in mon.transitions()))
    counts = {s: sum(1 for _, x, _, _ in mon.log if x == s) for s in STAGES}
    say("observations per stage: " + ", ".join(f"{s} {n}" for s, n in counts.items()))
    if args.save:
        path = save_results("smartswap_long", out.getvalue())
        png = path[:-4] + ".png"
        print("saved", path, png if plot(r, png) else "(no plot: matplotlib is not installed)")
    return 0 if r["identical"] and r["rss_spread"] <= RSS_SLACK else 1


if __name__ == "__main__":
    raise SystemExit(main())
