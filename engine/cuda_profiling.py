"""Measuring a profile on the GPU: each operator's time, the link, the per-instruction cost.

As on the CPU backend (engine/profiling.py): the unlimited-memory program trains a few
iterations on the cuda backend; while ``timings`` is on, each iteration is issued
eagerly with CUDA events around every node's kernels, and a signature's time is the
median of its samples. The link is timed by ``measure_link`` with pinned buffers of up
to 64 MiB. The per-instruction cost is what a replayed (CUDA graph) iteration takes
beyond the sum of its kernels, per instruction.

Needs a GPU; this module itself imports no CUDA (the backend does).
"""
from __future__ import annotations

import statistics
from collections import defaultdict

from .backends.cuda import CudaBackend
from .data import TeacherData
from .executor import ProgramExecutor
from .ir import Graph
from .profile import Profile, signature
from .profiling import measure_link
from .program import COMPUTE, Program
from .training import Trainer

LINK_SIZES = (2**16, 2**20, 2**24, 2**26)


def measure_cuda_profile(g: Graph, ideal: Program, seed: int = 0, iterations: int = 5,
                         data: TeacherData | None = None, device: int = 0) -> Profile:
    """A Profile of ``g`` on CUDA device ``device``, from ``ideal`` (the unlimited program)."""
    backend = CudaBackend(device)
    try:
        trainer = Trainer(g, seed=seed, runner=ProgramExecutor(ideal, g, backend), data=data)
        trainer.step()                                    # warm-up: module loads, first replay
        walls = []
        for _ in range(iterations):
            trainer.step()
            walls.append(trainer.step_seconds)
        backend.timings = []
        for _ in range(iterations):
            trainer.step()
        samples: dict[str, list[float]] = defaultdict(list)
        for stream, nid, t0, t1 in backend.timings:
            if stream == COMPUTE:
                samples[signature(g, nid)].append(t1 - t0)
        backend.timings = None
        link = measure_link(backend, sizes=LINK_SIZES)
        device_name = backend.device_name
    finally:
        backend.close()
    ops = {sig: float(statistics.median(ts)) for sig, ts in samples.items()}
    kernels = sum(ops[signature(g, ins.target)] for ins in ideal.instrs if ins.kind == COMPUTE)
    dispatch = max(0.0, (statistics.median(walls) - kernels) / max(len(ideal.instrs), 1))
    return Profile(f"cuda:{device_name}", link, None, ops, min(dispatch, 0.5))
