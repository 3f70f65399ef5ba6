"""The CUDA kernels' logic, checked on the host (tests/ops/cuda_emulator.py; needs g++, no GPU).

For the smallest case of each distinct (operator, kernel sequence), the launch descriptors
run through the kernels compiled for the host and must give numpy's results, bit for bit
for the operators whose kernels follow numpy's operation order (test_cuda_kernels.EXACT).
A second pass makes every GEMM take 128x128 tiles. Host arithmetic is IEEE like the GPU's
(no contraction, correctly rounded fma and division) but exp/log/tanh come from the host
libm, so the GPU tests (test_cuda_kernels.py) remain the word on the device itself."""
import math
import zlib

import numpy as np
import pytest

from ops import cuda_launch

from . import cuda_emulator
from .cuda_cases import all_cases
from .test_cuda_kernels import assert_matches, make_inputs, numpy_outputs

pytestmark = pytest.mark.skipif(not cuda_emulator.available(), reason="g++ is needed to build the host emulation")

MAX_BLOCKS = 64            # blocks of fixed-size work (grid-stride axes run on two blocks)
MAX_ELEMENTS = 200_000


def _blocks(launches) -> int:
    return sum(math.prod(g if p else min(g, 2) for g, p in zip(l.grid, (*l.covers.per_block, 1, 1)[:3]))
               for l in launches)


def small_cases(ops_only=None):
    """The cheapest case of each (operator, kernel sequence) within the emulation's budget."""
    best = {}
    for c in all_cases():
        if ops_only and c.op not in ops_only:
            continue
        launches = c.decl.cuda_launches(c.attrs, c.ins, c.outs)
        cost = (_blocks(launches), sum(math.prod(t.shape) for t in (*c.ins, *c.outs)))
        if cost[0] > MAX_BLOCKS or cost[1] > MAX_ELEMENTS:
            continue
        key = (c.op, tuple(l.kernel for l in launches))
        if key not in best or cost < best[key][0]:
            best[key] = (cost, c)
    return [c for _, c in best.values()]


def emulate(c, arrays):
    outs = [np.full(t.shape, np.nan if np.dtype(t.dtype).kind == "f" else -1, dtype=t.dtype) for t in c.outs]
    scratch = [np.full(s, 0xFF, np.uint8) for s in c.decl.cuda_workspaces(c.attrs, c.ins, c.outs)]
    cuda_emulator.run(c.decl.cuda_launches(c.attrs, c.ins, c.outs), [np.ascontiguousarray(a) for a in arrays],
                      outs, scratch)
    return outs


GEMM_OPS = {"fully_connected", "fully_connected_grad_data", "fully_connected_grad_weight", "conv2d",
            "conv2d_grad_data", "conv2d_grad_weight", "batch_matmul"}


@pytest.fixture(params=["default tiles", "128x128 tiles"])
def tiles(request, monkeypatch):
    if request.param == "128x128 tiles":
        monkeypatch.setattr(cuda_launch, "FULL_GPU_TILES", 1)
        return GEMM_OPS
    return None


def emulation_failures(cases) -> list[str]:
    """Each case run on the host emulation against its numpy twin: one line per mismatch."""
    failures = []
    for c in cases:
        arrays = make_inputs(c, np.random.default_rng(zlib.crc32(c.id.encode())))
        try:
            assert_matches(c, emulate(c, arrays), numpy_outputs(c, arrays))
        except AssertionError as e:
            failures.append(f"{c.id}: {str(e)[:300]}")
    return failures


def test_kernels_match_numpy_on_the_host(tiles):
    failures = emulation_failures(small_cases(tiles))
    assert not failures, "\n".join(failures)


def test_the_emulated_cases_reach_every_kernel(monkeypatch):
    launched = set()
    for full in (cuda_launch.FULL_GPU_TILES, 1):
        monkeypatch.setattr(cuda_launch, "FULL_GPU_TILES", full)
        for c in small_cases():
            launched.update(l.kernel for l in c.decl.cuda_launches(c.attrs, c.ins, c.outs))
    defined = {name for family in cuda_emulator.nvrtc.FAMILIES for name in cuda_emulator.library(family)[1]}
    assert defined - launched == set()
