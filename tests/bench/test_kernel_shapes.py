"""bench.kernel_shapes: each GEMM-bound shape of a model on our kernels beside PyTorch's twin.

Without a GPU: our kernels run on the host emulation behind the fake driver and PyTorch's twins
on the CPU, so the twins are checked against our operators shape by shape (the figures a GPU
gives are not)."""
import numpy as np
import pytest

import zoo
from bench import kernel_shapes
from engine.backends.cuda import CudaBackend
from tests.engine.backends import fake_driver
from tests.ops import cuda_emulator

torch = pytest.importorskip("torch")


@pytest.mark.skipif(not cuda_emulator.available(), reason="g++ is needed to build the host emulation")
@pytest.mark.parametrize("family", ["wresnet", "rnn"])
def test_every_shape_matches_its_pytorch_twin(monkeypatch, family):
    fake_driver.install(monkeypatch, emulate=True)
    monkeypatch.setattr(kernel_shapes, "TORCH_DEVICE", "cpu")
    g = zoo.tiny(family)
    backend = CudaBackend(graphs=False)
    try:
        rows = kernel_shapes.measure(g, backend, torch, repeats=1)
    finally:
        backend.close()
    assert {r["op"] for r in rows} >= ({"conv2d", "conv2d_grad_data", "conv2d_grad_weight"} if family == "wresnet"
                                       else {"fully_connected", "fully_connected_grad_data"})
    assert sum(r["count"] for r in rows) == sum(n.op in kernel_shapes.GEMM_OPS for n in g.nodes)
    bad = [(r["op"], r["shape"], r["err"]) for r in rows if not r["err"] < 1e-5]
    assert not bad, bad
    for r in rows:          # a GPU's times in the table; here the CPU twin is untimed (nan)
        r["theirs"] = r["ours"] / 2
    text = kernel_shapes.table(rows, top=3)
    assert text.count("\n") == 2 + 3 and "2.00" in text


def test_without_a_gpu_one_line(monkeypatch, capsys):
    monkeypatch.setattr(kernel_shapes, "detect_gpu", lambda: (0, "libcuda not loadable"))
    assert kernel_shapes.main([]) == 1
    assert capsys.readouterr().err == "bench.kernel_shapes needs a GPU: libcuda not loadable\n"
