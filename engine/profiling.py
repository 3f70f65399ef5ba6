"""Measuring a profile on a backend, shared by the CPU (engine/cpu_profiling.py) and CUDA
(engine/cuda_profiling.py) entry points, which differ only in their backend, how many
iterations they time and how they derive the per-instruction (dispatch) cost.

Operator times are medians of the kernels' times while the unlimited-memory program trains
on the backend (warm, as in training). The link is timed through the backend's own copy path.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .data import TeacherData
from .executor import ProgramExecutor
from .ir import Graph
from .profile import Link, signature
from .program import COMPUTE, SWAP_IN, SWAP_OUT, Program
from .training import Trainer

if TYPE_CHECKING:
    from .backends.interface import Backend

LINK_SIZES = (2**12, 2**16, 2**20, 2**22)


def measure_link(backend: Backend, sizes=LINK_SIZES, repeats: int = 5, pick=min) -> Link:
    """Fit latency + bytes/bandwidth to copies each way timed on their stream (``pick`` of each
    size's repeats: ``fit_copies``), and time both ways at once for the duplex rate. Works on any
    backend with host_buffer, allocate_arena, view, copy_h2d/copy_d2h, synchronize and a
    ``timings`` list."""
    biggest = max(sizes)
    backend.allocate_arena(2 * biggest)
    host = [backend.host_buffer((biggest,), np.uint8) for _ in range(2)]
    dev = [backend.view(0, (biggest,), np.uint8), backend.view(biggest, (biggest,), np.uint8)]
    backend.timings = []
    for n in sizes * repeats:
        backend.copy_h2d(SWAP_IN, dev[0][:n], host[0][:n])
        backend.synchronize()
        backend.copy_d2h(SWAP_OUT, host[1][:n], dev[1][:n])
        backend.synchronize()
    fits = [fit_copies([(n, t1 - t0) for s, n, t0, t1 in backend.timings if s == stream], pick)
            for stream in (SWAP_IN, SWAP_OUT)]
    latency = float(np.mean([f[0] for f in fits]))
    both = []
    for _ in range(repeats):
        backend.timings = []
        backend.copy_h2d(SWAP_IN, dev[0], host[0])
        backend.copy_d2h(SWAP_OUT, host[1], dev[1])
        backend.synchronize()
        both.append(max(t1 for *_, t1 in backend.timings) - min(t0 for _, _, t0, _ in backend.timings))
    backend.timings = None
    duplex = 2 * biggest / max(min(both) - latency, 1e-9)
    return Link(fits[0][1], fits[1][1], duplex, latency)


def fit_copies(timed: list[tuple[int, float]], pick=min) -> tuple[float, float]:
    """(latency, bytes per second) of one direction from (bytes, seconds) copies, fitted to
    ``pick`` of each size's repeats. Load only ever adds time, so a link measured apart fits
    each size's fastest (``min``), not every repeat: on a busy machine one stalled small copy
    tilted the line until its slope, the bandwidth, was negative (issue 39); copies timed
    while training fit their mean (``statistics.fmean``: what adds up over a step). Where the picked copies
    still do not grow with their size, the biggest one's bytes over its time is the rate
    (latency counted in it: slower, not absurd)."""
    repeats: dict[int, list[float]] = {}
    for n, seconds in timed:
        repeats.setdefault(n, []).append(seconds)
    sizes = np.array(sorted(repeats), dtype=float)
    times = np.array([pick(repeats[n]) for n in sorted(repeats)])
    slope, intercept = np.polyfit(sizes, times, 1) if len(sizes) > 1 else (0.0, 0.0)
    if not slope > 0:
        return 0.0, float(sizes[-1] / max(times[-1], 1e-12))
    return max(float(intercept), 0.0), 1.0 / float(slope)


@dataclass
class Measurement:
    ops: dict[str, float]                       # signature -> median kernel seconds
    kernels: list[tuple[int, float, float]]     # (node, start, end) on the compute stream, timed iterations
    step_seconds: list[float]                   # wall time of each untimed iteration (``wall_iterations``)
    link: Link


def measure_profile(backend: Backend, g: Graph, ideal: Program, seed: int, iterations: int, data: TeacherData | None,
                    wall_iterations: int = 0, link_sizes=LINK_SIZES, link_pick=min) -> Measurement:
    """Train ``ideal`` (the unlimited program) on ``backend``: a warm-up iteration, then
    ``wall_iterations`` with the kernels untimed (their wall times kept), then ``iterations``
    with every kernel timed; then time the link. Closes the backend."""
    try:
        trainer = Trainer(g, seed=seed, runner=ProgramExecutor(ideal, g, backend), data=data)
        trainer.step()                                    # warm-up: caches, module loads, first replay
        walls = []
        for _ in range(wall_iterations):
            trainer.step()
            walls.append(trainer.step_seconds)
        backend.timings = []
        for _ in range(iterations):
            trainer.step()
        kernels = [(nid, t0, t1) for stream, nid, t0, t1 in backend.timings if stream == COMPUTE]
        backend.timings = None
        link = measure_link(backend, sizes=link_sizes, pick=link_pick)
    finally:
        backend.close()
    samples: dict[str, list[float]] = defaultdict(list)
    for nid, t0, t1 in kernels:
        samples[signature(g, nid)].append(t1 - t0)
    ops = {sig: float(np.median(ts)) for sig, ts in samples.items()}
    return Measurement(ops, kernels, walls, link)
