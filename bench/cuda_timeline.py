"""Where a swapping program's time goes on the GPU, beside the simulator's account of it.

GPU only. For one model and budget (a profile measured on this GPU, e.g. one that
bench.cuda_vs_torch saved under bench/profiles/), it prints

1. whole-iteration CUDA graph replay beside per-instruction issue from Python, for the
   unlimited program and the budgeted one: time per iteration and the host CPU time spent
   handing the iteration's work to the GPU (not the wait for it);
2. one eagerly issued iteration of the budgeted program with every kernel and copy timed on
   its stream (CUDA events), beside the simulated timeline: per stream the busy time, the
   compute stream's idle time, and the kernels' total against the profile's (which shows
   whether copies slow the kernels or the kernels wait for copies);

and saves both timelines, instruction by instruction, to an .npz (``--save``) to read offline.

    python -m bench.cuda_timeline --model wresnet-50-2 --batch 32 --size 224 --budget 0.5 \\
        --profile bench/profiles/profile_wresnet-50-2_b32_s224.json [--save OUT.npz]
"""
from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np
from tabulate import tabulate

import zoo
from bench.cuda_vs_torch import RandomData
from engine.backends.detect import detect_gpu
from engine.executor import ProgramExecutor
from engine.liveness import peak_bytes
from engine.profile import Profile
from engine.program import COMPUTE, STREAM_NAMES, STREAMS, SWAP_OUT
from engine.training import Trainer
from planner import policy
from planner.facts import GraphFacts
from planner.simulate import simulate
from planner.verify import verify


def issue_costs(g, program, data, graphs: bool, iterations: int) -> tuple[float, float]:
    """(median seconds per iteration, median host CPU seconds issuing (or replaying) an
    iteration's work; waiting for the GPU afterwards is not counted)."""
    from engine.backends.cuda import CudaBackend
    backend = CudaBackend(graphs=graphs)
    try:
        runner = ProgramExecutor(program, g, backend)
        tr = Trainer(g, seed=0, runner=runner, data=data)
        tr.step()
        tr.step()
        wall, cpu = [], []
        for _ in range(iterations):
            tr.step()
            cpu.append(runner.issue_cpu_seconds)
            wall.append(tr.step_seconds)
        return statistics.median(wall), statistics.median(cpu)
    finally:
        backend.close()


def timed_iteration(g, program, data) -> tuple[np.ndarray, np.ndarray]:
    """Per instruction, measured (start, finish) in seconds of one eager iteration (nan for a
    swap-out that only drops its tensor: nothing is issued for it)."""
    from engine.backends.cuda import CudaBackend
    backend = CudaBackend(graphs=False)
    try:
        tr = Trainer(g, seed=0, runner=ProgramExecutor(program, g, backend), data=data)
        tr.step()
        backend.timings = []
        tr.step()
        timings = backend.timings
        backend.timings = None
    finally:
        backend.close()
    issued = [i for i, ins in enumerate(program.instrs) if ins.kind != SWAP_OUT or ins.copy]
    if len(issued) != len(timings):
        raise RuntimeError(f"{len(timings)} timings for {len(issued)} issued instructions")
    start = np.full(len(program.instrs), np.nan)
    finish = np.full(len(program.instrs), np.nan)
    for i, (stream, _, t0, t1) in zip(issued, timings):
        if stream != program.instrs[i].kind:
            raise RuntimeError(f"instruction {i}: timed on stream {stream}, issued on {program.instrs[i].kind}")
        start[i], finish[i] = t0, t1
    return start, finish


def stream_rows(program, label, start, finish) -> list[list]:
    """Per stream its busy ms, then the compute stream's idle ms and the span."""
    kinds = np.array([ins.kind for ins in program.instrs])
    timed = ~np.isnan(start)
    busy = {s: float(np.sum(finish[(kinds == s) & timed] - start[(kinds == s) & timed])) for s in STREAMS}
    span = float(np.nanmax(finish) - np.nanmin(start))
    rows = [[label, STREAM_NAMES[s], f"{busy[s] * 1e3:.1f}"] for s in STREAMS]
    return rows + [[label, "compute idle", f"{(span - busy[COMPUTE]) * 1e3:.1f}"],
                   [label, "span", f"{span * 1e3:.1f}"]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--budget", type=float, default=0.5, help="fraction of the unlimited peak")
    ap.add_argument("--profile", required=True, help="a profile measured on this GPU")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--save", metavar="FILE.npz")
    args = ap.parse_args(argv)
    count, reason = detect_gpu()
    if count == 0:
        print(f"cuda_timeline: no GPU ({reason}); this benchmark runs on a GPU only", file=sys.stderr)
        return 1
    g = zoo.build(args.model, batch=args.batch, size=args.size)
    profile = Profile.load(args.profile)
    secs = profile.node_seconds(g)
    facts = GraphFacts(g)
    data = RandomData(g)
    ideal = policy.unlimited_program(g, facts)
    budget = max(facts.smallest_budget, int(args.budget * peak_bytes(g)))
    program = policy.plan_with("swapadvisor", g, budget, profile, facts=facts, allocator="pool")
    verify(program, g, budget)
    print(f"# python -m bench.cuda_timeline {' '.join(argv or sys.argv[1:])}  ({profile.device})")

    rows = []
    for label, p in (("unlimited", ideal), (f"{args.budget:g} of peak", program)):
        sim = simulate(p, g, profile, secs).total
        for graphs in (True, False):
            wall, cpu = issue_costs(g, p, data, graphs, args.iterations)
            rows.append([label, "graph replay" if graphs else "per instruction", f"{wall * 1e3:.1f}",
                         f"{cpu * 1e3:.1f}", f"{sim * 1e3:.1f}"])
            print(tabulate([rows[-1]]), file=sys.stderr, flush=True)
    print("\nIssue: one CUDA graph per iteration beside every instruction issued from Python")
    print(tabulate(rows, headers=["program", "issue", "ms / iteration", "host CPU ms issuing", "simulated ms"],
                   disable_numparse=True))

    start, finish = timed_iteration(g, program, data)
    sim = simulate(program, g, profile, secs)
    comp = [i for i, ins in enumerate(program.instrs) if ins.kind == COMPUTE]
    kernels_measured = float(np.sum(finish[comp] - start[comp]))
    kernels_profile = float(sum(secs[program.instrs[i].target] for i in comp))
    print(f"\nOne eager iteration of the budgeted program, timed per instruction (ms); kernels "
          f"{kernels_measured * 1e3:.1f} measured here, {kernels_profile * 1e3:.1f} by the profile")
    print(tabulate(stream_rows(program, "measured", start, finish)
                   + stream_rows(program, "simulated", sim.start, sim.finish),
                   headers=["timeline", "stream", "ms"], disable_numparse=True))
    if args.save:
        kinds = np.array([ins.kind for ins in program.instrs])
        target = np.array([ins.target for ins in program.instrs])
        np.savez(args.save, kind=kinds, target=target, measured_start=start, measured_finish=finish,
                 simulated_start=sim.start, simulated_finish=sim.finish,
                 deps=np.array([d for ins in program.instrs for d in ins.deps]),
                 deps_count=np.array([len(ins.deps) for ins in program.instrs]))
        print(f"\ntimelines saved to {args.save}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
