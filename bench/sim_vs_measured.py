"""SwapAdvisor Figure 11 (Section 6.5) on the CPU backend: simulated beside measured time per
iteration, and whether the simulator ranks the plans as the measurement does.

For each model and budget: plan (SwapAdvisor planner, default order, simple
allocation; with ``--allocator va`` the chunked allocation, its Programs run through
a page table of real virtual memory), verify, simulate with a profile measured on
this machine, then execute and time iterations. Prints the ratio (the target is within 15%) and, to
say where an error sits, each stream's busy time measured in one more iteration over simulated.

The paper's Figure 11: 20 plans (Inception-4 and WResNet-152-10 at batch 32 and 64, measured on a
V100), actual time within -12%..+4% of simulated, and 19 of the 20 keeping their simulated order
when run. Ours: the plans below, on this CPU with an emulated link; the order check counts the
plans that keep their simulated order (the most plans ordered alike by both, as the paper's "19
of 20") and the pairs that do. Measured times depend on the machine's load: the output gives the
one-minute load average before and after the timing, each plan's spread of timed iterations, and
a warning line when the machine was busy (engine.timing_trust).

    python -m bench.sim_vs_measured [--iterations 5] [--link-gbps 0.5] [--allocator va --chunk-kib 64] [--save]
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
from bisect import bisect_left
from dataclasses import replace
from itertools import combinations

import numpy as np
from tabulate import tabulate

from engine.backends.cpu import CpuBackend, EmulatedLink
from engine.executor import ProgramExecutor
from engine.liveness import peak_bytes
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT
from engine.cpu_profiling import measure_cpu_profile
from engine.timing_trust import NOISY_SPREAD, HostLoad, busy_warning, load_average, spread
from engine.training import Trainer
from planner import policy
from allocator.registry import takes_option
from planner.budget import make_budget
from planner.errors import OutOfRoom
from planner.facts import GraphFacts
from planner.simulate import simulate
from planner.verify import verify
from bench.results_file import Transcript, cpu_name, save_results
from zoo import small

MODELS = {
    "lstm-2x256": lambda: small.lstm(batch=32, steps=8, features=128, hidden=256, layers=2, classes=10),
    "residual-cnn": lambda: small.residual_cnn(batch=32, image=16, channels=16, stages=3),
    "lstm-3x128": lambda: small.lstm(batch=64, steps=12, features=64, hidden=128, layers=3, classes=10),
}


# The paper's Figure 11: 19 of its 20 plans keep their simulated order when run (Section 6.5).
PAPER_KEPT, PAPER_PLANS = 19, 20


def measure(g, program, link, iterations):
    """(median seconds per iteration, the timed iterations' seconds, each stream's busy seconds
    in one more iteration: compute, swap-in, swap-out, as the backend timed its kernels and
    copies, and that iteration's start and finish per instruction; that timing stays out of the
    median)."""
    backend = CpuBackend(link)
    try:
        tr = Trainer(g, seed=0, runner=ProgramExecutor(program, g, backend))
        tr.step()
        times = []
        for _ in range(iterations):
            tr.step()
            times.append(tr.step_seconds)
        backend.timings = []
        tr.step()
        busy = [sum(t1 - t0 for s, _, t0, t1 in backend.timings if s == k) for k in (COMPUTE, SWAP_IN, SWAP_OUT)]
        return statistics.median(times), times, busy, per_instruction(program, backend.timings)
    finally:
        backend.close()


def per_instruction(program, timings) -> tuple[np.ndarray, np.ndarray]:
    """(start, finish) per instruction from the backend's timings of one iteration: each stream
    runs its instructions in program order, so a stream's k-th timing is its k-th instruction."""
    start, finish = np.full(len(program.instrs), np.nan), np.full(len(program.instrs), np.nan)
    for k in (COMPUTE, SWAP_IN, SWAP_OUT):
        mine = [i for i, ins in enumerate(program.instrs) if ins.kind == k]
        timed = [(t0, t1) for s, _, t0, t1 in timings if s == k]
        for i, (t0, t1) in zip(mine, timed):
            start[i], finish[i] = t0, t1
    return start, finish


def waits(program, start, finish) -> list[tuple[int, float]]:
    """The instructions that waited for another stream: the last of their dependencies to finish
    ran on another stream, after their own stream's previous instruction. Per such instruction,
    the seconds from that dependency's finish to its own start: the measured wake-up. (The
    simulator puts its wake-up, ``Profile.wake_s``, inside the instruction instead: there these
    seconds are 0 and ``wake_s`` is charged.)"""
    previous = {}
    out = []
    for i, ins in enumerate(program.instrs):
        if np.isnan(start[i]):
            continue
        own = finish[previous[ins.kind]] if ins.kind in previous else -np.inf
        other = [finish[d] for d in ins.deps if program.instrs[d].kind != ins.kind and not np.isnan(finish[d])]
        if other and max(other) > own:
            out.append((i, float(start[i] - max(other))))
        previous[ins.kind] = i
    return out


def busy_ratios(program, timeline, measured_busy) -> str:
    """Measured over simulated busy time per stream (compute, in, out): where the error sits."""
    kinds = np.array([ins.kind for ins in program.instrs])
    out = []
    for k, real in zip((COMPUTE, SWAP_IN, SWAP_OUT), measured_busy):
        sim = float(np.sum((timeline.finish - timeline.start)[kinds == k]))
        out.append(f"{real / sim:.2f}" if sim > 0 else "-")
    return " / ".join(out)


def plans_in_order(simulated, measured) -> int:
    """The most plans that simulation and measurement order alike: the longest run of plans,
    taken in simulated order, whose measured times rise too (one plan out of place costs one,
    as the paper's 'the only exception' among 19 of 20)."""
    by_sim = [m for _, m in sorted(zip(simulated, measured))]
    tails: list[float] = []                 # patience sorting: longest strictly rising subsequence
    for m in by_sim:
        i = bisect_left(tails, m)
        tails[i:i + 1] = [m]
    return len(tails)


def pairs_in_order(simulated, measured) -> tuple[int, int]:
    """(pairs of plans whose simulated and measured times order them alike, all pairs)."""
    pairs = list(combinations(range(len(simulated)), 2))
    alike = sum((simulated[i] - simulated[j]) * (measured[i] - measured[j]) > 0 for i, j in pairs)
    return alike, len(pairs)


def order_lines(simulated, measured) -> list[str]:
    """The rank agreement in words, beside the paper's 19 of 20."""
    if len(simulated) < 2:
        return ["order: fewer than two plans, nothing to rank"]
    kept = plans_in_order(simulated, measured)
    alike, pairs = pairs_in_order(simulated, measured)
    return [f"order: {kept} of {len(simulated)} plans keep their simulated order when measured "
            f"(paper, Figure 11: {PAPER_KEPT} of {PAPER_PLANS}); {alike} of {pairs} pairs ordered alike"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--link-gbps", type=float, default=0.5)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--allocator", choices=("pool", "va"), default="pool", help="swapadvisor's placement (default pool)")
    ap.add_argument("--chunk-kib", type=int, default=64, help="with --allocator va: the chunk, in KiB (default 64)")
    ap.add_argument("--save", action="store_true", help="write bench/results/sim_vs_measured_cpu_<allocator>_<date>.txt")
    args = ap.parse_args(argv)
    options = {"chunk_bytes": args.chunk_kib << 10} if takes_option(args.allocator, "chunk_bytes") else {}
    link = EmulatedLink(args.link_gbps * 1e9, args.link_gbps * 1e9, 1.6 * args.link_gbps * 1e9)
    say = Transcript()

    say(f"# python -m bench.sim_vs_measured {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip())
    say(f"# machine (timed here): {platform.platform()}, {os.cpu_count()} cores: {cpu_name()}; "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
    say("# SwapAdvisor Figure 11 (Section 6.5) on this CPU: simulated against measured seconds per iteration, "
        f"swapadvisor ({args.allocator}), emulated link {args.link_gbps:g} GB/s one way; target within 15%")
    rows, sims, reals, spreads = [], [], [], []
    before = load_average()
    for name in args.models.split(","):
        g = MODELS[name]()
        facts = GraphFacts(g)
        profile = measure_cpu_profile(g, policy.unlimited_program(g, facts), link)
        secs = profile.node_seconds(g)
        peak = peak_bytes(g)
        smallest = facts.smallest_budget
        for label, budget in (("0.5 peak", max(smallest, peak // 2)), ("smallest", smallest)):
            request = policy.PlanRequest(g, facts, make_budget(facts, budget), profile, secs, allocator=args.allocator,
                                         allocator_options=options)
            try:
                program = policy.get("swapadvisor").make(request)
            except OutOfRoom as e:          # the chunks need more than the pool's least
                print(f"{name} at {label}: {e}", file=sys.stderr)
                continue
            verify(program, g, budget)
            timeline = simulate(program, g, profile, secs)
            sim = timeline.total
            unwoken = simulate(program, g, replace(profile, wake_s=0.0), secs).total   # as before wake-ups were charged
            real, times, busy, (start, finish) = measure(g, program, link, args.iterations)
            measured_waits = [s for _, s in waits(program, start, finish)]
            simulated_waits = len(waits(program, timeline.start, timeline.finish))
            sims.append(sim)
            reals.append(real)
            spreads.append(spread(times))
            rows.append([name, label, f"{budget / 2**20:.2f}", len(program.instrs), f"{1e6 * profile.wake_s:.0f}",
                         f"{unwoken:.4f}", f"{sim:.4f}", f"{real:.4f}", f"{(unwoken - real) / real:+.1%}",
                         f"{(sim - real) / real:+.1%}",
                         "-" if spreads[-1] is None else f"{spreads[-1]:.0%}", busy_ratios(program, timeline, busy),
                         f"{len(measured_waits)}, {1e3 * sum(measured_waits):.1f} / "
                         f"{simulated_waits}, {1e3 * simulated_waits * profile.wake_s:.1f}"])
            print(tabulate([rows[-1]]), file=sys.stderr, flush=True)
    load = HostLoad.now(before)
    say(tabulate(rows, headers=["model", "budget", "MiB", "instructions", "wake us", "sim s, no wake",
                                "simulated s", "measured s", "error, no wake", "sim error", "spread",
                                "busy measured/sim: compute / in / out", "waits n, ms measured / sim"],
                 disable_numparse=True))
    say("(wake: the profile's wake-up of a stream that waited on another (engine/cpu_profiling.measure_wake_s), "
        "charged by the simulator; 'no wake' is the same Program simulated without it)")
    say("(spread: the timed iterations' interquartile range over their median)")
    say("(waits: the instructions that waited for another stream's (the last dependency to finish ran there, after "
        "their own stream's previous one), and the time from that finish to their start, in the busy-time iteration; "
        "simulated: as many wake-ups as the simulated timeline has such waits, at the profile's wake us each)")
    for line in order_lines(sims, reals):
        say(line)
    say(load.describe())
    warnings = [busy_warning(load)]
    noisy = [s for s in spreads if s is not None and s > NOISY_SPREAD]
    if noisy:
        warnings.append(f"{len(noisy)} plan(s) spread more than {NOISY_SPREAD:.0%} of their median over the timed "
                        "iterations: their measured times, and the order check, are noise at this size")
    for w in filter(None, warnings):
        say(f"WARNING: {w}")
    if args.save:
        print(f"saved {save_results(f'sim_vs_measured_cpu_{args.allocator}', say.text())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
