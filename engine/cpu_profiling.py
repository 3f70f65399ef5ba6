"""Measuring a profile on the CPU backend: each operator's time and the per-instruction cost
(engine/profiling.py measures). For the emulated link, the link's times include the
pacing's sleep overshoot."""
from __future__ import annotations

import numpy as np

from .backends.cpu import CpuBackend, EmulatedLink
from .data import TeacherData
from .ir import Graph
from .profile import Profile
from .profiling import measure_profile
from .program import Program


def measure_cpu_profile(g: Graph, ideal: Program, link: EmulatedLink = EmulatedLink(), seed: int = 0,
                        iterations: int = 3, data: TeacherData | None = None) -> Profile:
    """A Profile of ``g`` on this machine's CPU backend, from ``ideal`` (the unlimited program):
    each signature gets the median of its samples over ``iterations`` after a warm-up."""
    m = measure_profile(CpuBackend(link), g, ideal, seed, iterations, data)
    # The compute stream's gap between one kernel's end and the next one's start: the
    # host work per instruction (the ideal program rarely waits on another stream).
    gaps = [b[1] - a[2] for a, b in zip(m.kernels, m.kernels[1:]) if b[1] > a[2]]
    dispatch = float(np.median(gaps)) if gaps else 0.0
    return Profile("cpu", m.link, None, m.ops, dispatch)
