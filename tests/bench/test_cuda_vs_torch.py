"""bench/cuda_vs_torch.py's PyTorch twin, checked on the CPU: for every zoo family, a few
float64 training iterations of our numpy reference and of PyTorch (autograd and
torch.optim.SGD on the translated forward pass, same parameters, same batches) give the
same losses and parameters. In float64 rounding stays near 1e-13, so any difference in an
operator's forward or backward rule, in the SGD update or in the translation shows up.

(float32 is not used: some tiny CNNs are chaotic over several SGD steps, so rounding alone
makes float32 runs part; a batch norm over 2 values, for one, has a gradient that is zero
in exact arithmetic and pure rounding noise in either implementation.)

Marked ``torch``: skipped where PyTorch is not importable (CI), run by bench/gpu_session.sh
on the GPU machine, whose image has it. PyTorch is never a dependency of the engine."""
import numpy as np
import pytest

import zoo
from engine.ir import Kind
from engine.training import ReferenceRunner, Trainer

torch = pytest.importorskip("torch")
from bench.cuda_vs_torch import RandomData, TorchTwin  # noqa: E402

pytestmark = pytest.mark.torch

# Batches and images large enough that no batch norm normalises fewer than ~16 values.
FAMILIES = {"wresnet": dict(batch=8, size=64), "inception": dict(batch=8, size=139),
            "nasnet": dict(batch=8, size=64), "rnn": {}, "brnn": {}}
STEPS = 3


@pytest.mark.parametrize("family", FAMILIES)
def test_pytorch_twin_trains_like_our_reference(family):
    g = zoo.tiny(family, dtype="float64", **FAMILIES[family])
    data = RandomData(g)
    ours = Trainer(g, seed=0, runner=ReferenceRunner(g), data=data)
    twin = TorchTwin(g, torch, torch.device("cpu"))
    for i in range(STEPS):
        ours_loss, twin_loss = ours.step(), float(twin.step(data.batch(i)))
        assert ours_loss == pytest.approx(twin_loss, rel=1e-9), f"iteration {i}"
    state = ours.state
    trained = [t for t in twin.values if g.tensors[t].kind == Kind.PARAMETER]
    assert trained
    for t in trained:
        expected = twin.values[t].detach().numpy()
        scale = max(float(np.max(np.abs(expected))), 1e-12)
        assert np.max(np.abs(state[t] - expected)) <= 1e-9 * scale, g.tensors[t].name
