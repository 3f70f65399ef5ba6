"""Every transformer case's CUDA kernels (tests/ops/transformer_cases.py) on the host emulation,
against the numpy twin: test_cuda_emulated runs only the cheapest case per kernel sequence,
which would leave the causal mask, several id chunks and the 128x128 tiles unrun."""
import numpy as np
import pytest

from ops import cuda_launch

from . import cuda_emulator
from .test_cuda_emulated import emulate, emulation_failures
from .test_cuda_kernels import assert_matches, numpy_outputs
from .cuda_cases import with_dtype
from .transformer_cases import make_inputs, transformer_cases

pytestmark = pytest.mark.skipif(not cuda_emulator.available(), reason="g++ is needed to build the host emulation")


@pytest.mark.parametrize("dtype", ["float32"])     # float64 twins: test_cuda_emulated
def test_transformer_kernels_match_numpy_on_the_host(dtype):
    failures = emulation_failures([with_dtype(c, dtype) for c in transformer_cases()])
    assert not failures, "\n".join(failures)


def test_batch_matmul_with_128x128_tiles(monkeypatch):
    monkeypatch.setattr(cuda_launch, "FULL_GPU_TILES", 1)
    for c in transformer_cases():
        if c.op == "batch_matmul":
            launches = c.decl.cuda_launches(c.attrs, c.ins, c.outs)
            assert not launches[0].kernel.endswith("_s")
            arrays = make_inputs(c, np.random.default_rng(1))
            assert_matches(c, emulate(c, arrays), numpy_outputs(c, arrays))
