"""Measuring a profile on the GPU: each operator's time, the link, the per-instruction cost.

As on the CPU backend (engine/profiling.py measures): the unlimited-memory program trains a
few iterations on the cuda backend; while ``timings`` is on, each iteration is issued
eagerly with CUDA events around every node's kernels, and a signature's time is the
median of its samples. The link is timed with pinned buffers of up to 64 MiB. The
per-instruction cost is what a replayed (CUDA graph) iteration takes beyond the sum of its
kernels, per instruction, from as many untimed iterations as timed ones.

Needs a GPU; this module itself imports no CUDA (the backend does).
"""
from __future__ import annotations

import statistics

from .backends.cuda import CudaBackend
from .data import TeacherData
from .ir import Graph
from .profile import Profile, signature
from .profiling import measure_profile
from .program import COMPUTE, Program

LINK_SIZES = (2**16, 2**20, 2**24, 2**26)


def measure_cuda_profile(g: Graph, ideal: Program, seed: int = 0, iterations: int = 5,
                         data: TeacherData | None = None, device: int = 0) -> Profile:
    """A Profile of ``g`` on CUDA device ``device``, from ``ideal`` (the unlimited program)."""
    backend = CudaBackend(device)
    m = measure_profile(backend, g, ideal, seed, iterations, data, wall_iterations=iterations,
                        link_sizes=LINK_SIZES)
    kernels = sum(m.ops[signature(g, ins.target)] for ins in ideal.instrs if ins.kind == COMPUTE)
    dispatch = max(0.0, (statistics.median(m.step_seconds) - kernels) / max(len(ideal.instrs), 1))
    return Profile(f"cuda:{backend.device_name}", m.link, None, m.ops, min(dispatch, 0.5))
