"""GPT: a decoder-only transformer language model (GPT-2's layout), one training iteration.

Token and position embeddings, ``layers`` pre-norm blocks (causal multi-head
self-attention, then a GELU MLP four times wider, each added back to the residual
stream), a final layer norm, a language-model head tied to the token embedding (as
GPT-2's), and the mean cross-entropy of the next-token prediction at every position.
The residual stream is kept as [batch * seq, width] rows, so every dense layer is one
``fully_connected``; attention reshapes it to [batch, heads, seq, head width].

Choices:
- positions: the position table has ``seq`` rows (the length trained on) and is added to
  every sequence of the batch through one ``concat`` of it (its gradient sums the copies);
- labels: one class per position, [batch, seq], flattened for the loss; with synthetic
  data (engine.data) they are a teacher GPT's predictions from the prefix up to there;
- the attention scale 1/sqrt(head width) is folded into the softmax; no dropout.

Presets: ``gpt-tiny`` (trains in seconds on the CPU backend), GPT-2 small, medium, large
and XL (124M, 355M, 774M, 1.56B parameters, the sizes OpenAI published) and a 7B-class
model (Llama-7B's width, depth and vocabulary in GPT-2's layout: 6.7B parameters).
"""
from __future__ import annotations

from engine.autodiff import Adam, SGD, build_training_graph
from engine.ir import MAX_TENSORS, Graph
from engine.layer_scopes import layer_scope
from .layers import causal_attention, fully_connected, named_preset, next_token_loss, split_heads

GPT2_VOCAB = 50257

PRESETS = {
    "gpt-tiny": dict(layers=2, width=32, heads=4, seq=16, vocab=32, batch=8),
    "gpt2-small": dict(layers=12, width=768, heads=12, seq=1024, vocab=GPT2_VOCAB, batch=8),
    "gpt2-medium": dict(layers=24, width=1024, heads=16, seq=1024, vocab=GPT2_VOCAB, batch=8),
    "gpt2-large": dict(layers=36, width=1280, heads=20, seq=1024, vocab=GPT2_VOCAB, batch=8),
    "gpt2-xl": dict(layers=48, width=1600, heads=25, seq=1024, vocab=GPT2_VOCAB, batch=8),
    "gpt-7b": dict(layers=32, width=4096, heads=32, seq=2048, vocab=32000, batch=4),
}


def dense(g: Graph, x: int, out: int, name: str) -> int:
    """A fully connected layer with bias; GPT-2's N(0, 0.02) weights."""
    return fully_connected(g, x, out, name, init="normal:0.02")


def layer_norm(g: Graph, x: int, name: str) -> int:
    d, dt = g.shape(x)[-1], g.dtype(x).name
    with g.scope(name):
        gamma = g.parameter("gamma", (d,), dt, init="ones")
        beta = g.parameter("beta", (d,), dt, init="zeros")
        (y, _, _) = g.apply("layer_norm", [x, gamma, beta], name="ln")
    return y


def attention(g: Graph, x: int, batch: int, seq: int, heads: int) -> int:
    """Causal multi-head self-attention of the rows ``x`` [batch*seq, width]."""
    width = g.shape(x)[1]
    qkv = dense(g, x, 3 * width, "qkv")
    q, k, v = g.apply("split", [qkv], name="split", axis=1, sizes=(width,) * 3)
    q, k, v = (split_heads(g, t, batch, seq, heads, n) for t, n in ((q, "q"), (k, "k"), (v, "v")))
    return dense(g, causal_attention(g, q, k, v), width, "proj")


def mlp(g: Graph, x: int) -> int:
    width = g.shape(x)[1]
    (h,) = g.apply("gelu", [dense(g, x, 4 * width, "fc")], name="gelu")
    return dense(g, h, width, "fc2")


def block(g: Graph, x: int, batch: int, seq: int, heads: int) -> int:
    """x + attention(ln(x)), then that + mlp(ln(that))."""
    with g.scope("attn"):
        (x,) = g.apply("add", [x, attention(g, layer_norm(g, x, "ln"), batch, seq, heads)], name="residual")
    with g.scope("mlp"):
        (x,) = g.apply("add", [x, mlp(g, layer_norm(g, x, "ln"))], name="residual")
    return x


def gpt(layers: int = 12, width: int = 768, heads: int = 12, seq: int = 1024, vocab: int = GPT2_VOCAB,
        batch: int = 8, tie_embeddings: bool = True, dtype: str = "float32",
        optimizer: SGD | Adam = Adam(weight_decay=0.01), positions: int | None = None) -> Graph:
    """One training iteration of a GPT of ``layers`` blocks of ``width`` with ``heads`` heads,
    on ``batch`` sequences of ``seq`` tokens from a vocabulary of ``vocab``. ``positions``: rows
    of the position table (default ``seq``); a batch of shorter sequences reads its first
    ``seq`` rows, so graphs of several sequence lengths share one table (bucketed lengths)."""
    positions = seq if positions is None else positions
    for what, v in (("layers", layers), ("width", width), ("heads", heads), ("seq", seq), ("vocab", vocab),
                    ("batch", batch)):
        if v < 1:
            raise ValueError(f"gpt: {what} must be positive, got {v}")
    if positions < seq:
        raise ValueError(f"gpt: the position table's {positions} rows cannot cover sequences of {seq}")
    if batch > MAX_TENSORS // 4:        # [rows] * batch below: --batch 2**30 was a MemoryError
        raise ValueError(f"gpt: batch {batch}: the graph repeats the position rows once per sequence, and holds at "
                         f"most {MAX_TENSORS} tensors; give a batch of at most {MAX_TENSORS // 4}")
    if width % heads:
        raise ValueError(f"gpt: width {width} is not a multiple of heads {heads}")
    g = Graph(f"gpt-{layers}x{width}")
    tokens = g.input("tokens", (batch, seq), "int32")
    wte = g.parameter("wte", (vocab, width), dtype, init="normal:0.02")
    wpe = g.parameter("wpe", (positions, width), dtype, init="normal:0.01")
    (x,) = g.apply("embedding", [wte, tokens], name="token_embedding")
    (x,) = g.apply("reshape", [x], name="token_rows", shape=(batch * seq, width))
    rows = wpe if positions == seq else g.apply("split", [wpe], name="position_rows", axis=0,
                                                sizes=(seq, positions - seq))[0]
    (pos,) = g.apply("concat", [rows] * batch, name="positions", axis=0)
    (x,) = g.apply("add", [x, pos], name="embedded")
    for layer in range(layers):
        with g.scope(layer_scope(layer)):
            x = block(g, x, batch, seq, heads)
    x = layer_norm(g, x, "ln_f")
    head = wte if tie_embeddings else g.parameter("lm_head", (vocab, width), dtype, init="normal:0.02")
    (logits,) = g.apply("fully_connected", [x, head], name="lm_head")
    return build_training_graph(g, next_token_loss(g, logits, batch, seq), optimizer)


def preset(name: str) -> dict:
    """The builder arguments of a named preset (ValueError naming the presets otherwise)."""
    return named_preset(PRESETS, "GPT", name)


def parameter_count(layers: int, width: int, seq: int, vocab: int, tie_embeddings: bool = True, **_) -> int:
    """Parameters of ``gpt(...)`` by formula (embeddings, 12 w^2 + 13 w per block, final norm)."""
    head = 0 if tie_embeddings else vocab * width
    return vocab * width + seq * width + layers * (12 * width * width + 13 * width) + 2 * width + head
