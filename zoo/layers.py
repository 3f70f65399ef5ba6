"""Building blocks shared by the model builders: convolution, batch norm, classifier.

Every block opens its own ``g.scope(name)``, so its parameters get unique,
readable names (``stage2/block0/conv1/w``) and a builder never has to invent
them. Parameters take the dtype of the block's input.
"""
from __future__ import annotations

import math

from engine.ir import Graph


def pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def conv(g: Graph, x: int, out_ch: int, kernel, stride=1, padding=None, groups: int = 1,
         name: str = "conv", dilation: int = 1) -> int:
    """A bias-free convolution; ``padding`` defaults to half the (dilated) kernel ("same" at
    stride 1)."""
    kh, kw = pair(kernel)
    padding = (dilation * (kh // 2), dilation * (kw // 2)) if padding is None else pair(padding)
    in_ch = g.shape(x)[1]
    dilated = {"dilation": dilation} if dilation != 1 else {}
    with g.scope(name):
        w = g.parameter("w", (out_ch, in_ch // groups, kh, kw), g.dtype(x).name, init="he_normal")
        (y,) = g.apply("conv2d", [x, w], name="conv", stride=pair(stride), padding=padding, groups=groups, **dilated)
    return y


def batch_norm(g: Graph, x: int, name: str = "bn", in_place: bool = False) -> int:
    """Training-mode batch norm; its running statistics are STATE leaves updated each iteration.
    Split in two, ``stats`` (batch_norm_stats: the statistics and running statistics) and
    ``apply`` (batch_norm_apply: y), so that y comes from a node a plan may recompute; the
    apply's gradient is right only with the stats of its own x, which is how they are paired here.
    ``in_place``: the fused batch_norm, y over x (inference graphs, which nothing differentiates
    or recomputes)."""
    ch, dt = g.shape(x)[1], g.dtype(x).name
    with g.scope(name):
        gamma = g.parameter("gamma", (ch,), dt, init="ones")
        beta = g.parameter("beta", (ch,), dt, init="zeros")
        running_mean = g.state("running_mean", (ch,), dt, init="zeros")
        running_var = g.state("running_var", (ch,), dt, init="ones")
        if in_place:
            return g.apply("batch_norm", [x, gamma, beta, running_mean, running_var], name="bn", in_place=True)[0]
        mean, invstd, _, _ = g.apply("batch_norm_stats", [x, running_mean, running_var], name="stats")
        (y,) = g.apply("batch_norm_apply", [x, gamma, beta, mean, invstd], name="apply")
    return y


def relu(g: Graph, x: int, name: str = "relu", in_place: bool = False) -> int:
    return g.apply("relu", [x], name=name, **_in_place(in_place))[0]


def _in_place(on: bool) -> dict:
    """The attribute that lets an operator write its output over its input (inference graphs)."""
    return {"in_place": True} if on else {}


def conv_bn(g: Graph, x: int, out_ch: int, kernel, stride=1, padding=None, relu_after: bool = True,
            name: str = "conv", in_place: bool = False, dilation: int = 1) -> int:
    """conv -> BN (-> ReLU), the unit every CNN here is made of (``in_place``: BN and ReLU
    may overwrite their inputs, for inference graphs)."""
    with g.scope(name):
        y = conv(g, x, out_ch, kernel, stride, padding, dilation=dilation)
        y = batch_norm(g, y, in_place=in_place)
        if relu_after:
            y = relu(g, y, in_place=in_place)
    return y


# Pools and concatenations often come several to a scope: unnamed, the graph numbers them.
def max_pool(g: Graph, x: int, kernel: int, stride: int, padding: int = 0, name: str | None = None) -> int:
    return g.apply("max_pool2d", [x], name=name, kernel=kernel, stride=stride, padding=padding)[0]


def avg_pool(g: Graph, x: int, kernel: int, stride: int, padding: int = 0, name: str | None = None) -> int:
    return g.apply("avg_pool2d", [x], name=name, kernel=kernel, stride=stride, padding=padding)[0]


def concat(g: Graph, xs: list[int], name: str | None = None) -> int:
    return g.apply("concat", xs, name=name, axis=1)[0]


def logits(g: Graph, features: int, classes: int, name: str = "fc") -> int:
    """A fully connected layer with bias, from [N, K] features to [N, classes]."""
    return fully_connected(g, features, classes, name)


def fully_connected(g: Graph, x: int, out: int, name: str, init: str = "he_normal") -> int:
    """[N, K] -> [N, out] with weights drawn by ``init`` and a zero bias."""
    dt = g.dtype(x).name
    with g.scope(name):
        w = g.parameter("w", (out, g.shape(x)[1]), dt, init=init)
        b = g.parameter("b", (out,), dt, init="zeros")
        (y,) = g.apply("fully_connected", [x, w, b], name="fc")
    return y


def cross_entropy(g: Graph, scores: int, name: str = "loss") -> int:
    """Mean softmax cross-entropy of ``scores`` [N, C] against a fresh integer label leaf."""
    labels = g.label(f"{name}_labels", (g.shape(scores)[0],))
    return g.apply("softmax_cross_entropy", [scores, labels], name=name)[0]


def image_classifier_head(g: Graph, x: int, classes: int) -> int:
    """Global average pooling and a fully connected layer: the logits of a CNN."""
    (pooled,) = g.apply("global_avg_pool", [x], name="global_pool")
    return logits(g, pooled, classes)


def widen(channels: int, width: float) -> int:
    """A channel count multiplied by the wide scale, never below one."""
    return max(1, int(round(channels * width)))


def split_heads(g: Graph, x: int, batch: int, seq: int, heads: int, name: str) -> int:
    """A decoder's rows [batch*seq, width] -> [batch, heads, seq, width/heads]."""
    (x,) = g.apply("reshape", [x], name=f"{name}_rows", shape=(batch, seq, heads, -1))
    return g.apply("transpose", [x], name=f"{name}_heads", axes=(0, 2, 1, 3))[0]


def causal_attention(g: Graph, q: int, k: int, v: int) -> int:
    """softmax(q k^T / sqrt(d), causal) v of [batch, heads, seq, d] heads, merged back to rows
    [batch*seq, heads*d]."""
    batch, heads, seq, d = g.shape(q)
    (scores,) = g.apply("batch_matmul", [q, k], name="scores", transpose_b=True)
    (probs,) = g.apply("softmax", [scores], name="probs", scale=1 / math.sqrt(d), causal=True)
    (ctx,) = g.apply("batch_matmul", [probs, v], name="context")
    (ctx,) = g.apply("transpose", [ctx], name="merge", axes=(0, 2, 1, 3))
    return g.apply("reshape", [ctx], name="merge_rows", shape=(batch * seq, heads * d))[0]


def next_token_loss(g: Graph, logits: int, batch: int, seq: int) -> int:
    """A language model's mean cross-entropy of ``logits`` [batch * seq, vocab] against a fresh
    label leaf of the next tokens [batch, seq]."""
    labels = g.label("next_tokens", (batch, seq))
    (flat,) = g.apply("reshape", [labels], name="next_token_rows", shape=(batch * seq,))
    return g.apply("softmax_cross_entropy", [logits, flat], name="loss")[0]


def named_preset(presets: dict, family: str, name: str) -> dict:
    """The builder arguments of preset ``name`` (ValueError naming the family's presets otherwise)."""
    try:
        return dict(presets[name])
    except KeyError:
        raise ValueError(f"no {family} preset '{name}' (presets: {', '.join(presets)})") from None
