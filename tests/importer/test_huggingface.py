"""A Hugging Face GPT-2 (built from its config with random weights, nothing downloaded), with
eager and with sdpa attention, imported and checked against PyTorch as the other models are:
float64 loss and every gradient to 1e-10 relative, float32 20 AdamW steps to 1e-4."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from engine.autodiff import Adam  # noqa: E402

from .harness import export_import, our_losses, ours, relative_error, theirs, torch_losses  # noqa: E402
from .torch_models import WithLoss  # noqa: E402

pytestmark = pytest.mark.torch


class Logits(torch.nn.Module):
    """GPT2LMHeadModel's logits for input ids (no cache)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids, use_cache=False).logits


def hf_gpt2(attention: str, dtype, seed: int = 0):
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=100, n_positions=16, n_embd=32, n_layer=2, n_head=4,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    config._attn_implementation = attention
    return WithLoss(Logits(transformers.GPT2LMHeadModel(config))).to(dtype).train()


def batch(seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 100, (2, 16), generator=g), torch.randint(0, 100, (2, 16), generator=g)


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_float64_loss_and_gradients_equal_pytorch(attention, tmp_path):
    model, args = hf_gpt2(attention, torch.float64), batch(0)
    imported = export_import(model, args, tmp_path / attention)
    loss, grads, _ = ours(imported, args)
    want_loss, want_grads, _ = theirs(model, args)
    assert relative_error(loss, want_loss) <= 1e-10
    assert set(grads) == set(want_grads)
    for name, g in want_grads.items():
        assert relative_error(grads[name], g) <= 1e-10, name


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_float32_twenty_adamw_steps_track_pytorch(attention, tmp_path):
    model, batches = hf_gpt2(attention, torch.float32), [batch(1 + i) for i in range(20)]
    imported = export_import(model, batches[0], tmp_path / attention)
    want = torch_losses(model, torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                                 weight_decay=1e-4), batches)
    got = our_losses(imported, Adam(lr=1e-3, weight_decay=1e-4, decoupled=True), batches)
    assert np.max(np.abs(got - want) / np.abs(want)) <= 1e-4, (got, want)
