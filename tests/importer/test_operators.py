"""Every Core ATen operator the importer maps, exercised by a small PyTorch module and checked
against PyTorch in float64 (loss and every gradient to 1e-10); together with the three models
they import at least 45 distinct Core ATen operators, all listed in docs/importing.md."""
import json
import os
import re

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from engine.importer import aten  # noqa: E402

from .harness import export_import, ours, relative_error, theirs  # noqa: E402

pytestmark = pytest.mark.torch
DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "importing.md")


class Pointwise(nn.Module):
    """Unary, scalar and broadcasting binary operators, clamps, where with a constant mask
    (comparisons run only on constants, at import time)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.rand(3, 4) + 0.5)
        self.b = nn.Parameter(torch.randn(4))
        self.register_buffer("mask", torch.rand(3, 4) > 0.5, persistent=False)

    def forward(self, x, y):
        z = x * self.w + self.b                      # broadcasting mul, add
        a = torch.exp(-z.abs()) + torch.log(self.w) - torch.sqrt(self.w) * torch.rsqrt(self.w + 1)
        a = a + torch.sin(z) * torch.cos(z) + torch.reciprocal(self.w + 2) + torch.sigmoid(z) + torch.tanh(z)
        a = a + F.silu(z) + F.gelu(z) + F.gelu(z, approximate="tanh") + F.relu(z) + z.pow(3) - 2.0 / (self.w + 1)
        a = a + torch.maximum(z, self.w) + torch.minimum(z, self.b) + z.clamp(min=-0.5) + z.clamp(max=0.5)
        a = a + torch.where(self.mask, z, self.w) + (1 - z) / 3 - z.amax(dim=1, keepdim=True) + z.amin(dim=0)
        return a.sum() / y.shape[0] + a.mean(dim=1).sum() * 0.5


class Shapes(nn.Module):
    """Views, permutes, slices, selects, splits, concatenation, expand, matrix products."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 4))
        self.v = nn.Parameter(torch.randn(2, 4, 5))

    def forward(self, x, y):
        h = x @ self.w.t()                            # mm with a transposed parameter
        h2 = torch.bmm(h.view(2, 3, 6).permute(0, 2, 1), x.view(2, 3, 4))      # bmm of a permute
        parts = h.split(2, dim=1)
        joined = torch.cat([parts[2], parts[0], h[:, 1:5:2]], dim=1)
        picked = h2.select(1, 2) + h2[:, -1, :]
        e = self.v.expand(2, 4, 5).sum(dim=(0, 2))
        k = torch.addmm(self.w[0, :4], x, self.w[:4].t() * 2, beta=0.5, alpha=1.5)
        return (joined.pow(2).mean() + picked.sum() + e.unsqueeze(0).squeeze(0).sum() + k.sum()
                + F.cross_entropy(h, y))


class Images(nn.Module):
    """Convolution with a bias, batch norm, average pooling, adaptive average pooling."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x, y):
        h = F.avg_pool2d(self.bn(self.conv(x)), 2, stride=1, padding=1, count_include_pad=False)
        return F.cross_entropy(self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1)), y)


class Masks(nn.Module):
    """Comparisons and logic on computed tensors (a padding mask from token ids, thresholds),
    any, gather by labels, index_select and indexing with a constant index."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 6)
        self.w = nn.Parameter(torch.randn(6, 5))

    def forward(self, ids, y):
        h = self.emb(ids)                                      # [B, T, 6]
        pad = ids.ne(0)
        keep = ((h > 0.1) & pad.unsqueeze(-1)) | (h <= -1.5) | (h == 0.25)
        h = torch.where(keep, h, h * 0.5)
        h = torch.where(keep.any(dim=-1, keepdim=True), h, h - 1.0)
        h = torch.where(torch.logical_not(keep) ^ (h >= 2.0), h, h + 1.0)
        logits = h @ self.w                                    # [B, T, 5]
        picked = logits.gather(-1, y.unsqueeze(-1))
        chosen = logits.index_select(1, torch.tensor([0, 2, 2]))
        rows = logits[:, torch.tensor([1, 3])]
        return -picked.mean() + chosen.pow(2).mean() + rows.sum() * 0.1 + (~pad).to(h.dtype).sum() * 0.01


CASES = {
    "pointwise": (Pointwise, lambda: (torch.randn(3, 4), torch.zeros(3, dtype=torch.long))),
    "shapes": (Shapes, lambda: (torch.randn(6, 4), torch.randint(0, 6, (6,)))),
    "images": (Images, lambda: (torch.randn(4, 3, 8, 8), torch.randint(0, 3, (4,)))),
    "masks": (Masks, lambda: (torch.randint(0, 20, (2, 4)), torch.randint(0, 5, (2, 4)))),
}


@pytest.mark.parametrize("name", CASES)
def test_operators_match_pytorch_in_float64(name, tmp_path):
    torch.manual_seed(0)
    build, make_args = CASES[name]
    model = build().double().train()
    args = tuple(a.double() if a.is_floating_point() else a for a in make_args())
    imported = export_import(model, args, tmp_path / name)
    loss, grads, state = ours(imported, args)
    want_loss, want_grads, want_buffers = theirs(model, args)
    assert relative_error(loss, want_loss) <= 1e-10
    for n, g in want_grads.items():
        assert relative_error(grads[n], g) <= 1e-10, n
    for n, v in state.items():
        assert relative_error(v, want_buffers[n]) <= 1e-10, n


def test_at_least_45_distinct_core_aten_operators_are_imported(tmp_path):
    """Import the modules above and the three models; count the operators their programs used."""
    from .torch_models import example

    used = set()
    for name, (build, make_args) in CASES.items():
        torch.manual_seed(0)
        export_import(build().train(), make_args(), tmp_path / name)
        used |= set(json.load(open(tmp_path / name / "model.json"))["source"]["aten_operators"])
    for name in ("resnet18", "gpt", "llama"):
        model, args = example(name, torch.float32)
        export_import(model, args, tmp_path / name)
        used |= set(json.load(open(tmp_path / name / "model.json"))["source"]["aten_operators"])
    used = {u for u in used if u.startswith("aten.")}
    assert len(used) >= 45, sorted(used)


def test_the_docs_list_every_operator_the_importer_maps():
    listed = set(re.findall(r"`(aten\.[A-Za-z0-9_.]+)`", open(DOCS).read()))
    mapped = {k for k in aten.CONVERTERS if k.startswith("aten.")} | set(aten.CONSTANT_ONLY)
    assert mapped <= listed, sorted(mapped - listed)
