"""Imported PyTorch models against PyTorch itself: in float64 the loss, every parameter's
gradient (our autodiff on the imported forward) and batch norm's running statistics equal
PyTorch's to 1e-10 relative; in float32, 20 optimizer steps (SGD, AdamW) track PyTorch's
losses within 1e-4 relative."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from engine.autodiff import SGD, Adam  # noqa: E402

from .harness import export_import, our_losses, ours, relative_error, theirs, torch_losses  # noqa: E402
from .torch_models import example  # noqa: E402

pytestmark = pytest.mark.torch
MODELS = ("resnet18", "gpt", "llama")


@pytest.mark.parametrize("name", MODELS)
def test_float64_loss_gradients_and_buffers_equal_pytorch(name, tmp_path):
    model, args = example(name, torch.float64)
    imported = export_import(model, args, tmp_path / name)
    loss, grads, state = ours(imported, args)
    want_loss, want_grads, want_buffers = theirs(model, args)
    assert relative_error(loss, want_loss) <= 1e-10, (loss, want_loss)
    assert set(grads) == set(want_grads)
    worst = max(want_grads, key=lambda n: relative_error(grads[n], want_grads[n]))
    assert relative_error(grads[worst], want_grads[worst]) <= 1e-10, worst
    for buffer, value in state.items():          # batch norm's running statistics after one step
        assert relative_error(value, want_buffers[buffer]) <= 1e-10, buffer


def _torch_optimizer(kind, params):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-4)
    return torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-4)


OUR_OPTIMIZERS = {"sgd": SGD(lr=0.05, momentum=0.9, weight_decay=1e-4),
                  "adamw": Adam(lr=1e-3, weight_decay=1e-4, decoupled=True)}


def _torch_losses(name, kind, dtype, batch):
    model, _ = example(name, dtype, batch=batch)
    batches = [example(name, dtype, seed=1 + i, batch=batch)[1] for i in range(20)]
    return torch_losses(model, _torch_optimizer(kind, model.parameters()), batches)


def _our_losses(name, kind, batch, tmp_path):
    model, args = example(name, torch.float32, batch=batch)
    imported = export_import(model, args, tmp_path / name)
    batches = [example(name, torch.float32, seed=1 + i, batch=batch)[1] for i in range(20)]
    return our_losses(imported, OUR_OPTIMIZERS[kind], batches)


@pytest.mark.parametrize("kind", ["sgd", "adamw"])
@pytest.mark.parametrize("name", ["gpt", "llama"])
def test_float32_twenty_steps_track_pytorch(name, kind, tmp_path):
    want = _torch_losses(name, kind, torch.float32, batch=2)
    got = _our_losses(name, kind, 2, tmp_path)
    assert np.max(np.abs(got - want) / np.abs(want)) <= 1e-4, (got, want)


@pytest.mark.parametrize("kind", ["sgd", "adamw"])
def test_float32_resnet_is_as_close_to_exact_as_pytorch_float32(kind, tmp_path):
    """ResNet-18 on random data is chaotic in float32: PyTorch's own float32 run leaves its
    float64 run by 1e-2..1 relative within 20 steps (batch norms over few values), so no float32
    implementation tracks another to 1e-4. Ours must stay as close to the float64 run as
    PyTorch's float32 does (the mean gap over the 20 steps within 3x of PyTorch's, plus 1e-4),
    after a first step equal to 1e-6."""
    exact = _torch_losses("resnet18", kind, torch.float64, batch=8)
    theirs32 = _torch_losses("resnet18", kind, torch.float32, batch=8)
    ours32 = _our_losses("resnet18", kind, 8, tmp_path)
    assert abs(ours32[0] - theirs32[0]) <= 1e-6 * abs(theirs32[0])
    our_gap, their_gap = np.abs(ours32 - exact) / exact, np.abs(theirs32 - exact) / exact
    print(f"mean gap to float64 over 20 steps: ours {our_gap.mean():.3g}, PyTorch float32 {their_gap.mean():.3g}")
    assert our_gap.mean() <= 3 * their_gap.mean() + 1e-4, (our_gap, their_gap)
