"""Simulated beside measured time per iteration on the CPU backend with the emulated link.

For each model and budget: plan (SwapAdvisor planner, default order, simple
allocation; with ``--allocator va`` the chunked allocation, its Programs run through
a page table of real virtual memory), verify, simulate with a profile measured on
this machine, then execute and time iterations. Prints the ratio (the target is within 15%) and, to
say where an error sits, each stream's busy time measured in one more iteration over simulated.

    python -m bench.sim_vs_measured [--iterations 5] [--link-gbps 0.5] [--allocator va --chunk-kib 64]
"""
from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np
from tabulate import tabulate

from engine.backends.cpu import CpuBackend, EmulatedLink
from engine.executor import ProgramExecutor
from engine.liveness import peak_bytes
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT
from engine.cpu_profiling import measure_cpu_profile
from engine.training import Trainer
from planner import policy
from allocator.registry import takes_option
from planner.budget import make_budget
from planner.errors import OutOfRoom
from planner.facts import GraphFacts
from planner.simulate import simulate
from planner.verify import verify
from zoo import small

MODELS = {
    "lstm-2x256": lambda: small.lstm(batch=32, steps=8, features=128, hidden=256, layers=2, classes=10),
    "residual-cnn": lambda: small.residual_cnn(batch=32, image=16, channels=16, stages=3),
    "lstm-3x128": lambda: small.lstm(batch=64, steps=12, features=64, hidden=128, layers=3, classes=10),
}


def measure(g, program, link, iterations):
    """(median seconds per iteration, each stream's busy seconds in one more iteration: compute,
    swap-in, swap-out, as the backend timed its kernels and copies; that timing stays out of
    the median)."""
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
        return statistics.median(times), busy
    finally:
        backend.close()


def busy_ratios(program, timeline, measured_busy) -> str:
    """Measured over simulated busy time per stream (compute, in, out): where the error sits."""
    kinds = np.array([ins.kind for ins in program.instrs])
    out = []
    for k, real in zip((COMPUTE, SWAP_IN, SWAP_OUT), measured_busy):
        sim = float(np.sum((timeline.finish - timeline.start)[kinds == k]))
        out.append(f"{real / sim:.2f}" if sim > 0 else "-")
    return " / ".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--link-gbps", type=float, default=0.5)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--allocator", choices=("pool", "va"), default="pool", help="swapadvisor's placement (default pool)")
    ap.add_argument("--chunk-kib", type=int, default=64, help="with --allocator va: the chunk, in KiB (default 64)")
    args = ap.parse_args(argv)
    options = {"chunk_bytes": args.chunk_kib << 10} if takes_option(args.allocator, "chunk_bytes") else {}
    link = EmulatedLink(args.link_gbps * 1e9, args.link_gbps * 1e9, 1.6 * args.link_gbps * 1e9)
    rows = []
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
            real, busy = measure(g, program, link, args.iterations)
            rows.append([name, label, f"{budget / 2**20:.2f}", len(program.instrs), f"{sim:.4f}",
                         f"{real:.4f}", f"{(sim - real) / real:+.1%}", busy_ratios(program, timeline, busy)])
            print(tabulate([rows[-1]]), file=sys.stderr, flush=True)
    print(tabulate(rows, headers=["model", "budget", "MiB", "instructions", "simulated s", "measured s",
                                  "sim error", "busy measured/sim: compute / in / out"], disable_numparse=True))


if __name__ == "__main__":
    main()
