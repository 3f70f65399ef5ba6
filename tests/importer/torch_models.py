"""PyTorch models the importer is checked on (tests and bench): a GPT-2-style decoder (tied
embeddings, causal attention written out, tanh GELU), a Llama-style model (RMSNorm, RoPE,
grouped-query attention through scaled_dot_product_attention, SiLU-gated MLP) and torchvision's
ResNet, each wrapped so that forward(inputs, targets) returns the loss, as the README says."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class WithLoss(nn.Module):
    """The README's recipe: forward(inputs, targets) -> the mean cross-entropy."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, inputs, targets):
        logits = self.model(inputs)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class GPTBlock(nn.Module):
    def __init__(self, width: int, heads: int, sdpa: bool = False):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, w = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(w, dim=2)
        q, k, v = (z.view(b, t, self.heads, w // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:                     # written out, as GPT-2's own code does
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(w // self.heads))
            mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
            y = F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, w))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab=50, seq=8, width=16, heads=2, layers=2, sdpa=False):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(seq, width)
        self.blocks = nn.ModuleList(GPTBlock(width, heads, sdpa) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.wte.weight          # tied, as GPT-2's

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(width))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotate(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class Llama(nn.Module):
    def __init__(self, vocab=50, seq=8, width=32, heads=4, kv_heads=2, hidden=64, layers=1):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, width // heads
        self.emb = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(LlamaBlock(width, heads, kv_heads, hidden) for _ in range(layers))
        self.norm, self.head = RMSNorm(width), nn.Linear(width, vocab, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).double() / self.hd))
        angles = torch.outer(torch.arange(seq).double(), inv)
        table = torch.cat((angles, angles), -1)
        self.register_buffer("cos", table.cos(), persistent=False)
        self.register_buffer("sin", table.sin(), persistent=False)

    def forward(self, idx):
        x = self.emb(idx)
        t = idx.shape[1]
        cos, sin = self.cos[:t].to(x.dtype), self.sin[:t].to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.head(self.norm(x))


class LlamaBlock(nn.Module):
    def __init__(self, width, heads, kv_heads, hidden):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, width // heads
        self.n1, self.n2 = RMSNorm(width), RMSNorm(width)
        self.q = nn.Linear(width, width, bias=False)
        self.k = nn.Linear(width, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(width, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(width, width, bias=False)
        self.gate, self.up = nn.Linear(width, hidden, bias=False), nn.Linear(width, hidden, bias=False)
        self.down = nn.Linear(hidden, width, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        h = self.n1(x)
        q = self.q(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.k(h).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v(h).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        group = self.heads // self.kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, -1)
        x = x + self.o(y)
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def resnet18(classes: int = 10):
    import torchvision

    return torchvision.models.resnet18(num_classes=classes)


def example(name: str, dtype=torch.float64, seed: int = 0, batch: int = 2):
    """(WithLoss(model), (inputs, targets)) of a named test model, in ``dtype``, seeded."""
    torch.manual_seed(seed)
    if name == "resnet18":
        model = resnet18()
        args = (torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,)))
    elif name == "gpt":
        model, args = GPT(), (torch.randint(0, 50, (batch, 8)), torch.randint(0, 50, (batch, 8)))
    elif name == "llama":
        model, args = Llama(), (torch.randint(0, 50, (batch, 8)), torch.randint(0, 50, (batch, 8)))
    else:
        raise ValueError(name)
    m = WithLoss(model).to(dtype).train()
    args = tuple(a.to(dtype) if a.is_floating_point() else a for a in args)
    return m, args
