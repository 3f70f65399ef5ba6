"""Imported PyTorch models against PyTorch itself: in float64 the loss, every parameter's
gradient (our autodiff on the imported forward) and batch norm's running statistics equal
PyTorch's to 1e-10 relative; in float32, 20 optimizer steps (SGD, AdamW) track PyTorch's
losses within 1e-4 relative."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from engine.autodiff import SGD, Adam  # noqa: E402
from engine.initializers import initial_state  # noqa: E402
from engine.library.imported import training_graph  # noqa: E402
from engine.training import ReferenceRunner  # noqa: E402

from .harness import export_import, feeds_of, ours, relative_error, theirs  # noqa: E402
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


@pytest.mark.parametrize("kind", ["sgd", "adamw"])
@pytest.mark.parametrize("name", MODELS)
def test_float32_twenty_steps_track_pytorch(name, kind, tmp_path):
    # ResNet at batch 8: with 2 images its last batch norms see 2 values per channel, where
    # float32 rounding alone moves the loss by a fraction of a percent.
    batch = 8 if name == "resnet18" else 2
    model, args = example(name, torch.float32, batch=batch)
    imported = export_import(model, args, tmp_path / name)
    batches = [example(name, torch.float32, seed=1 + i, batch=batch)[1] for i in range(20)]

    opt = _torch_optimizer(kind, model.parameters())
    want = []
    for batch in batches:
        opt.zero_grad()
        loss = model(*batch)
        loss.backward()
        opt.step()
        want.append(float(loss))

    g = training_graph(imported, OUR_OPTIMIZERS[kind])
    runner = ReferenceRunner(g)
    runner.load_state(initial_state(g, 0))
    got = [runner.step(feeds_of(imported, g, batch)) for batch in batches]
    assert np.max(np.abs(np.array(got) - want) / np.abs(want)) <= 1e-4, (got, want)
