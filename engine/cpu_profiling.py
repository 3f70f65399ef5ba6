"""Measuring a profile on the CPU backend: each operator's time and the per-instruction cost.

Operator times are medians of the kernels' times while the unlimited-memory
program runs on the backend (warm, as in training). The link is
timed through the backend's own copy path (for the emulated link, that
includes the pacing's sleep overshoot), and the dispatch cost is the compute
stream's gap between consecutive kernels.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from .backends.cpu import CpuBackend, EmulatedLink
from .data import TeacherData
from .executor import ProgramExecutor
from .ir import Graph
from .profile import Link, Profile, signature
from .program import COMPUTE, SWAP_IN, SWAP_OUT, Program
from .training import Trainer


def measure_link(backend, sizes=(2**12, 2**16, 2**20, 2**22), repeats: int = 5) -> Link:
    """Fit latency + bytes/bandwidth to copies each way timed on their stream, and time both
    ways at once for the duplex rate. Works on any backend with host_buffer, allocate_arena,
    view, copy_h2d/copy_d2h, synchronize and a ``timings`` list."""
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
    fits = []
    for stream in (SWAP_IN, SWAP_OUT):
        xs, ys = zip(*[(n, t1 - t0) for s, n, t0, t1 in backend.timings if s == stream])
        slope, intercept = np.polyfit(np.array(xs, float), np.array(ys), 1)
        fits.append((max(float(intercept), 0.0), 1.0 / float(slope)))
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


def measure_cpu_profile(g: Graph, ideal: Program, link: EmulatedLink = EmulatedLink(), seed: int = 0,
                        iterations: int = 3, data: TeacherData | None = None) -> Profile:
    """A Profile of ``g`` on this machine's CPU backend.

    Operator times are measured where they run: the ``ideal`` (unlimited-memory)
    Program executes a few iterations on the backend with each kernel timed, and
    each signature gets the median of its samples after a warm-up iteration."""
    backend = CpuBackend(link)
    try:
        trainer = Trainer(g, seed=seed, runner=ProgramExecutor(ideal, g, backend), data=data)
        trainer.step()
        backend.timings = []
        for _ in range(iterations):
            trainer.step()
        samples: dict[str, list[float]] = defaultdict(list)
        kernels = [(nid, t0, t1) for stream, nid, t0, t1 in backend.timings if stream == COMPUTE]
        for nid, t0, t1 in kernels:
            samples[signature(g, nid)].append(t1 - t0)
        # The compute stream's gap between one kernel's end and the next one's start: the
        # host work per instruction (the ideal program rarely waits on another stream).
        gaps = [b[1] - a[2] for a, b in zip(kernels, kernels[1:]) if b[1] > a[2]]
        dispatch = float(np.median(gaps)) if gaps else 0.0
        backend.timings = None
        measured_link = measure_link(backend)
    finally:
        backend.close()
    ops = {sig: float(np.median(ts)) for sig, ts in samples.items()}
    return Profile("cpu", measured_link, None, ops, dispatch)
