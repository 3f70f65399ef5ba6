"""The dataflow simulator: a Program and a profile -> the iteration's timeline.

Three in-order streams. An instruction starts when its stream is idle and its
dependencies have finished. Compute takes the profile's time for its node. A
copy takes the link's latency, then moves its bytes at the one-way rate, or at
half the duplex rate while a copy in the other direction is moving bytes too;
rates are re-evaluated whenever a copy starts or ends, so partial overlap is
charged exactly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.ir import Graph
from engine.program import COMPUTE, STREAM_NAMES, SWAP_IN, SWAP_OUT, Program

from engine.profile import Profile


@dataclass
class Timeline:
    start: np.ndarray     # seconds, per instruction
    finish: np.ndarray
    total: float          # the iteration's time: when the last stream finishes

    def busy(self, program: Program, kind: int) -> float:
        sel = [i for i, ins in enumerate(program.instrs) if ins.kind == kind]
        return float(np.sum(self.finish[sel] - self.start[sel]))

    def to_chrome_trace(self, program: Program, g: Graph) -> dict:
        """Chrome trace JSON (open in Perfetto or chrome://tracing): one row per stream, a counter
        of device bytes in use, and a flow arrow per dependency that crosses streams
        (``planner.trace``)."""
        from .trace import chrome_trace

        return chrome_trace(program, g, self.start, self.finish, self.total)


def simulate(program: Program, g: Graph, profile: Profile, node_seconds: np.ndarray | None = None) -> Timeline:
    """Inputs: a Program, its Graph, a Profile (node_seconds may be given precomputed,
    as the search does). Output: the Timeline of one iteration."""
    secs = profile.node_seconds(g) if node_seconds is None else node_seconds
    link = profile.link
    instrs = program.instrs
    n = len(instrs)
    kinds = np.fromiter((ins.kind for ins in instrs), dtype=np.int8, count=n)
    queues = [np.nonzero(kinds == k)[0].tolist() for k in range(3)]
    latency = np.zeros(n)
    work = np.empty(n)    # compute: seconds; copies: bytes
    for i, ins in enumerate(instrs):
        if ins.kind == COMPUTE:
            work[i] = secs[ins.target] + profile.dispatch_s
        else:
            work[i] = g.tensors[ins.target].nbytes if ins.copy else 0.0
            latency[i] = (link.latency_s + profile.dispatch_s) if ins.copy else 0.0
    start = np.full(n, math.nan)
    finish = np.full(n, math.inf)
    head = [0, 0, 0]
    running = [-1, -1, -1]
    one_way = (None, link.h2d_bytes_per_s, link.d2h_bytes_per_s)
    now = 0.0
    done = 0
    while done < n:
        for k in range(3):
            if running[k] < 0 and head[k] < len(queues[k]):
                i = queues[k][head[k]]
                if all(finish[d] <= now for d in instrs[i].deps):
                    running[k] = i
                    start[i] = now
                    head[k] += 1
        if running == [-1, -1, -1]:
            raise RuntimeError("simulation deadlocked: the program's edges contradict its stream order")
        moving = [running[k] >= 0 and latency[running[k]] == 0 for k in (SWAP_IN, SWAP_OUT)]
        rate = [1.0, one_way[SWAP_IN], one_way[SWAP_OUT]]
        if all(moving):
            rate[SWAP_IN] = rate[SWAP_OUT] = link.duplex_bytes_per_s / 2
        # Time until each running instruction finishes, or leaves its latency phase, at these rates;
        # dependencies only finish when something running does, so the soonest is the next event.
        steps = [(latency[i] if latency[i] > 0 else work[i] / rate[k], k)
                 for k, i in enumerate(running) if i >= 0]
        dt = min(s for s, _ in steps)
        now += dt
        for s, k in steps:
            i = running[k]
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
    total = float(np.max(finish)) if n else 0.0
    return Timeline(start, finish, total)
