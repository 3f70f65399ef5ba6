"""The timing model of three streams sharing one link, and the dispatch loop that runs it.

One loop serves two callers:
- the simulator (``planner.simulate``): each stream runs its instructions in program order
  (a CUDA stream is in-order), so an instruction waits for its stream's previous one;
- the stream-ordering pass (``planner.stream_order``): a copy stream, when idle, starts the
  most urgent of its instructions whose dependencies have finished; the order it ends up
  using becomes the Program's stream order, which then replays this timeline exactly.

Timing: an instruction starts when its stream is idle and its dependencies have finished.
Compute takes the profile's time for its node. A copy takes the link's latency, then moves
its bytes at the one-way rate, or at half the duplex rate while a copy in the other
direction is moving bytes too; rates are re-evaluated whenever a copy starts or ends, so
partial overlap is charged exactly.
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from engine.ir import Graph
from engine.profile import Profile
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT, Program


class Deadlock(RuntimeError):
    pass


def run_streams(program: Program, g: Graph, profile: Profile, node_seconds: np.ndarray,
                priority: np.ndarray | None = None, in_order=(COMPUTE, SWAP_IN, SWAP_OUT)):
    """Run the Program's instructions on three streams. Streams in ``in_order`` run in
    program order; the others start, when idle, their ready instruction of least
    ``priority`` (ties: program order). Returns (start, finish, dispatch order)."""
    link = profile.link
    instrs = program.instrs
    n = len(instrs)
    kinds = np.fromiter((ins.kind for ins in instrs), dtype=np.int8, count=n)
    latency = np.zeros(n)
    work = np.empty(n)    # compute: seconds; copies: bytes
    nbytes = [t.nbytes for t in g.tensors]
    waiting = np.zeros(n, dtype=np.int64)          # unfinished dependencies
    dependents: list[list[int]] = [[] for _ in range(n)]
    for i, ins in enumerate(instrs):
        if ins.kind == COMPUTE:
            work[i] = node_seconds[ins.target] + profile.dispatch_s
        elif ins.copy:
            work[i] = nbytes[ins.target]
            latency[i] = link.latency_s + profile.dispatch_s
        else:
            work[i] = 0.0
        deps = set(ins.deps)
        for d in deps:
            dependents[d].append(i)
        waiting[i] = len(deps)
    # In an in-order stream each instruction also waits for its stream's previous one.
    for k in in_order:
        seq = np.nonzero(kinds == k)[0]
        for a, b in zip(seq[:-1].tolist(), seq[1:].tolist()):
            dependents[a].append(b)
            waiting[b] += 1
    key = np.arange(n, dtype=float) if priority is None else np.asarray(priority, dtype=float)
    ready: list[list] = [[], [], []]
    for i in np.nonzero(waiting == 0)[0].tolist():
        ready[kinds[i]].append((key[i], i))
    for h in ready:
        heapq.heapify(h)
    start = np.full(n, math.nan)
    finish = np.full(n, math.inf)
    order: list[int] = []
    running = [-1, -1, -1]
    one_way = (1.0, link.h2d_bytes_per_s, link.d2h_bytes_per_s)
    half_duplex = link.duplex_bytes_per_s / 2
    now = 0.0
    done = 0
    while done < n:
        for k in range(3):
            if running[k] < 0 and ready[k]:
                i = heapq.heappop(ready[k])[1]
                running[k] = i
                start[i] = now
                order.append(i)
        if running == [-1, -1, -1]:
            raise Deadlock("simulation deadlocked: the program's edges contradict its stream order")
        rate = list(one_way)
        if (running[SWAP_IN] >= 0 and latency[running[SWAP_IN]] == 0
                and running[SWAP_OUT] >= 0 and latency[running[SWAP_OUT]] == 0):
            rate[SWAP_IN] = rate[SWAP_OUT] = half_duplex
        # Time until each running instruction finishes, or leaves its latency phase, at these
        # rates; dependencies only finish when something running does, so the soonest is next.
        dt = math.inf
        for k in range(3):
            i = running[k]
            if i >= 0:
                s = latency[i] if latency[i] > 0 else work[i] / rate[k]
                dt = min(dt, s)
        now += dt
        for k in range(3):
            i = running[k]
            if i < 0:
                continue
            s = latency[i] if latency[i] > 0 else work[i] / rate[k]
            hit = s <= dt * (1 + 1e-12)
            if latency[i] > 0:
                latency[i] = 0.0 if hit else latency[i] - dt
                hit = hit and work[i] == 0
            elif not hit:
                work[i] -= dt * rate[k]
            if hit:
                finish[i] = now
                running[k] = -1
                done += 1
                for j in dependents[i]:
                    waiting[j] -= 1
                    if waiting[j] == 0:
                        heapq.heappush(ready[kinds[j]], (key[j], j))
    return start, finish, order
