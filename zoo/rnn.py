"""RNN-L-XK and BRNN-L-XK: stacks of L LSTM layers of hidden size X*1024, unrolled in time.

As in the paper (Section 6.1): a layer is a list of LSTM cells, one per
sequence element, and all cells of a layer share that layer's parameters (one
weight tensor read by every step, so autodiff sums the per-step gradient
contributions with one ``sum_n``). A BRNN layer has two sub-layers with their
own parameters, one over the sequence and one over the reversed sequence, and
concatenates their outputs step by step.

Choices the paper leaves open:
- input: one dense vector of the hidden size per step (what an embedding
  lookup of a character would produce; the data carries no gradient), so every
  RNN layer's input weights have the shape of its hidden weights;
- loss: a character-level language model's, a softmax classifier (one shared
  fully connected layer, ``classes`` outputs) on every step of the top layer,
  the per-step losses averaged (``sum_n`` then ``scale``);
- the initial hidden and cell states are zero, so the first step skips the
  hidden-to-hidden product and the forget gate (which would multiply zeros).
"""
from __future__ import annotations

from engine.autodiff import SGD, build_training_graph
from engine.ir import Graph

from .layers import concat, cross_entropy

DEFAULT_STEPS = 35     # the usual truncated-BPTT length of LSTM language models (PTB)
DEFAULT_CLASSES = 256    # byte-level characters


def lstm_layer(g: Graph, xs: list[int], hidden: int) -> list[int]:
    """One LSTM layer over the inputs ``xs`` (in the order given); returns each step's output."""
    dt = g.dtype(xs[0]).name
    w_x = g.parameter("w_x", (4 * hidden, g.shape(xs[0])[1]), dt, init="xavier_uniform")
    w_h = g.parameter("w_h", (4 * hidden, hidden), dt, init="xavier_uniform")
    b = g.parameter("b", (4 * hidden,), dt, init="zeros")
    h = c = None
    hs = []
    for t, x in enumerate(xs):
        with g.scope(f"t{t}"):
            (gates,) = g.apply("fully_connected", [x, w_x, b], name="fc_x")
            if h is not None:
                (gh,) = g.apply("fully_connected", [h, w_h], name="fc_h")
                (gates,) = g.apply("add", [gates, gh], name="gates")
            i, f, cand, o = g.apply("split", [gates], name="split", axis=1, sizes=(hidden,) * 4)
            (i,) = g.apply("sigmoid", [i], name="in_gate")
            (o,) = g.apply("sigmoid", [o], name="out_gate")
            (cand,) = g.apply("tanh", [cand], name="candidate")
            (c_new,) = g.apply("mul", [i, cand], name="in_cand")
            if c is not None:
                (f,) = g.apply("sigmoid", [f], name="forget_gate")
                (kept,) = g.apply("mul", [f, c], name="forget_c")
                (c_new,) = g.apply("add", [kept, c_new], name="c")
            c = c_new
            (tc,) = g.apply("tanh", [c], name="tanh_c")
            (h,) = g.apply("mul", [o, tc], name="h")
        hs.append(h)
    return hs


def bidirectional_layer(g: Graph, xs: list[int], hidden: int) -> list[int]:
    """Two sub-layers, over the sequence and over its reverse, concatenated step by step."""
    with g.scope("fwd"):
        fwd = lstm_layer(g, xs, hidden)
    with g.scope("bwd"):
        bwd = lstm_layer(g, xs[::-1], hidden)[::-1]
    return [concat(g, [f, b], name=f"concat_t{t}") for t, (f, b) in enumerate(zip(fwd, bwd))]


def language_model_loss(g: Graph, hs: list[int], classes: int) -> int:
    """Mean over steps of a softmax classifier's cross-entropy; the classifier is shared by all steps."""
    dt = g.dtype(hs[0]).name
    with g.scope("classifier"):
        w = g.parameter("w", (classes, g.shape(hs[0])[1]), dt, init="he_normal")
        b = g.parameter("b", (classes,), dt, init="zeros")
    losses = []
    for t, h in enumerate(hs):
        with g.scope(f"classifier/t{t}"):
            (scores,) = g.apply("fully_connected", [h, w, b], name="fc")
            losses.append(cross_entropy(g, scores))
    (total,) = g.apply("sum_n", losses, name="loss_sum")
    return g.apply("scale", [total], name="loss", factor=1.0 / len(hs))[0]


def rnn(layers: int = 8, hidden: int = 8 * 1024, batch: int = 256, steps: int = DEFAULT_STEPS,
        classes: int = DEFAULT_CLASSES, bidirectional: bool = False, dtype: str = "float32",
        sgd: SGD = SGD()) -> Graph:
    """One training iteration of (B)RNN-``layers``-``hidden``/1024K over ``steps`` time steps."""
    kind = "brnn" if bidirectional else "rnn"
    g = Graph(f"{kind}-{layers}-{hidden / 1024:g}k")
    xs = [g.input(f"x_t{t}", (batch, hidden), dtype) for t in range(steps)]
    for layer in range(layers):
        with g.scope(f"layer{layer}"):
            xs = bidirectional_layer(g, xs, hidden) if bidirectional else lstm_layer(g, xs, hidden)
    loss = language_model_loss(g, xs, classes)
    return build_training_graph(g, loss, sgd)


def brnn(layers: int = 4, hidden: int = 8 * 1024, batch: int = 128, steps: int = DEFAULT_STEPS,
         classes: int = DEFAULT_CLASSES, dtype: str = "float32", sgd: SGD = SGD()) -> Graph:
    """One training iteration of BRNN-``layers``-``hidden``/1024K (the paper's batch is 128)."""
    return rnn(layers, hidden, batch, steps, classes, bidirectional=True, dtype=dtype, sgd=sgd)
