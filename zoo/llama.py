"""Llama 2: a decoder-only transformer language model (Meta's layout), one training iteration.

Token embedding, ``layers`` pre-norm blocks (RMSNorm, causal multi-head self-attention with
rotary position embeddings on queries and keys, then RMSNorm and a SwiGLU MLP, each added back
to the residual stream), a final RMSNorm, an untied language-model head, and the mean
cross-entropy of the next-token prediction at every position. As in zoo/gpt.py the residual
stream is [batch * seq, width] rows, every projection one bias-free ``fully_connected``, and
attention works on [batch, heads, seq, head width]; each block is the scope ``block<i>``
(``engine.layer_scopes``).

Choices, as Hugging Face's LlamaForCausalLM computes them:
- rotary embeddings: x * cos + rotate_half(x) * sin, rotate_half(x) = concat(-x2, x1) of x's
  two halves, with tables of ``seq`` rows (``engine.initializers``' ``rope_cos:`` and
  ``rope_sin:``): STATE leaves nothing updates, so they persist as a model's buffers do;
- the MLP's width: Llama 2's rule, 8/3 of the width rounded up to a multiple of 256 (11008 for
  4096); no grouped-query attention (Llama 2's 7B and 13B have as many key heads as heads);
- the attention scale 1/sqrt(head width) is folded into the softmax; no dropout, no biases.

Presets: ``llama-tiny`` (trains in seconds on the CPU backend) and ``llama2-7b`` (32 layers of
width 4096, 32 heads, 4096 tokens, a vocabulary of 32000: 6.74B parameters).
"""
from __future__ import annotations

from engine.autodiff import Adam, SGD, build_training_graph
from engine.ir import Graph
from engine.layer_scopes import layer_scope

from .layers import causal_attention, named_preset, next_token_loss, split_heads

LLAMA_VOCAB = 32000
ROPE_THETA = 10000.0
RMS_EPS = 1e-5      # Llama 2's rms_norm_eps

PRESETS = {
    "llama-tiny": dict(layers=2, width=32, heads=4, seq=16, vocab=32, batch=8),
    "llama2-7b": dict(layers=32, width=4096, heads=32, seq=4096, vocab=LLAMA_VOCAB, batch=4),
}


def mlp_width(width: int, multiple_of: int = 256) -> int:
    """Llama 2's SwiGLU width: int(2 * 4 * width / 3), rounded up to a multiple of ``multiple_of``."""
    hidden = int(2 * 4 * width / 3)
    return multiple_of * -(-hidden // multiple_of)


def linear(g: Graph, x: int, out: int, name: str) -> int:
    """A bias-free projection [N, K] -> [N, out]; N(0, 0.02) weights (initializer_range)."""
    w = g.parameter(f"{name}/w", (out, g.shape(x)[1]), g.dtype(x).name, init="normal:0.02")
    return g.apply("fully_connected", [x, w], name=name)[0]


def rms_norm(g: Graph, x: int, name: str) -> int:
    gamma = g.parameter(f"{name}/gamma", (g.shape(x)[-1],), g.dtype(x).name, init="ones")
    return g.apply("rms_norm", [x, gamma], name=name, eps=RMS_EPS)[0]


def rotate(g: Graph, x: int, cos: int, sin: int, name: str) -> int:
    """x * cos + rotate_half(x) * sin on x [batch, heads, seq, d], the tables [seq, d] broadcast."""
    d = g.shape(x)[-1]
    x1, x2 = g.apply("split", [x], name=f"{name}_halves", axis=3, sizes=(d // 2, d // 2))
    (neg,) = g.apply("unary", [x2], name=f"{name}_neg", fn="neg")
    (half,) = g.apply("concat", [neg, x1], name=f"{name}_rotated", axis=3)
    (a,) = g.apply("binary", [x, cos], name=f"{name}_cos", fn="mul")
    (b,) = g.apply("binary", [half, sin], name=f"{name}_sin", fn="mul")
    return g.apply("add", [a, b], name=f"{name}_rope")[0]


def attention(g: Graph, x: int, batch: int, seq: int, heads: int, rope: tuple[int, int]) -> int:
    """Causal multi-head self-attention of the rows ``x`` [batch*seq, width], rotary on q and k."""
    width = g.shape(x)[1]
    q, k, v = (split_heads(g, linear(g, x, width, p), batch, seq, heads, n)
               for p, n in (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v")))
    q, k = rotate(g, q, *rope, "q"), rotate(g, k, *rope, "k")
    return linear(g, causal_attention(g, q, k, v), width, "o_proj")


def swiglu(g: Graph, x: int) -> int:
    """down(silu(gate(x)) * up(x))."""
    width = g.shape(x)[1]
    hidden = mlp_width(width)
    (act,) = g.apply("unary", [linear(g, x, hidden, "gate_proj")], name="silu", fn="silu")
    (h,) = g.apply("mul", [act, linear(g, x, hidden, "up_proj")], name="gated")
    return linear(g, h, width, "down_proj")


def block(g: Graph, x: int, batch: int, seq: int, heads: int, rope: tuple[int, int]) -> int:
    """x + attention(norm(x)), then that + mlp(norm(that))."""
    with g.scope("attn"):
        (x,) = g.apply("add", [x, attention(g, rms_norm(g, x, "norm"), batch, seq, heads, rope)], name="residual")
    with g.scope("mlp"):
        (x,) = g.apply("add", [x, swiglu(g, rms_norm(g, x, "norm"))], name="residual")
    return x


def llama(layers: int = 32, width: int = 4096, heads: int = 32, seq: int = 4096, vocab: int = LLAMA_VOCAB,
          batch: int = 4, dtype: str = "float32", optimizer: SGD | Adam = Adam(weight_decay=0.01),
          rope_theta: float = ROPE_THETA) -> Graph:
    """One training iteration of a Llama 2 of ``layers`` blocks of ``width`` with ``heads`` heads,
    on ``batch`` sequences of ``seq`` tokens from a vocabulary of ``vocab``."""
    for what, v in (("layers", layers), ("width", width), ("heads", heads), ("seq", seq), ("vocab", vocab),
                    ("batch", batch)):
        if v < 1:
            raise ValueError(f"llama: {what} must be positive, got {v}")
    if width % heads or (width // heads) % 2:
        raise ValueError(f"llama: width {width} must be a multiple of heads {heads} with an even head width "
                         "(rotary embeddings turn pairs)")
    if not rope_theta > 0:
        raise ValueError(f"llama: rope_theta must be positive, got {rope_theta}")
    g = Graph(f"llama-{layers}x{width}")
    tokens = g.input("tokens", (batch, seq), "int32")
    embed = g.parameter("embed_tokens", (vocab, width), dtype, init="normal:0.02")
    head_width = width // heads
    rope = (g.state("rope_cos", (seq, head_width), dtype, init=f"rope_cos:{rope_theta:g}"),
            g.state("rope_sin", (seq, head_width), dtype, init=f"rope_sin:{rope_theta:g}"))
    (x,) = g.apply("embedding", [embed, tokens], name="token_embedding")
    (x,) = g.apply("reshape", [x], name="token_rows", shape=(batch * seq, width))
    for layer in range(layers):
        with g.scope(layer_scope(layer)):
            x = block(g, x, batch, seq, heads, rope)
    x = rms_norm(g, x, "norm")
    logits = linear(g, x, vocab, "lm_head")
    return build_training_graph(g, next_token_loss(g, logits, batch, seq), optimizer)


def preset(name: str) -> dict:
    """The builder arguments of a named preset (ValueError naming the presets otherwise)."""
    return named_preset(PRESETS, "Llama", name)


def parameter_count(layers: int, width: int, vocab: int, **_) -> int:
    """Parameters of ``llama(...)`` by formula: embedding and head, 4 w^2 + 3 w f + 2 w per block
    (f the MLP's width), the final norm."""
    return 2 * vocab * width + layers * (4 * width * width + 3 * width * mlp_width(width) + 2 * width) + width
