"""Small built-in models for tests and the default run: a residual CNN and a stacked LSTM.

They use the same operators as the paper-scale builders, at sizes the numpy
reference runs hundreds of iterations of in seconds.
"""
from __future__ import annotations

from engine.autodiff import SGD, build_training_graph
from engine.ir import Graph


def conv_bn(g: Graph, x: int, out_ch: int, kernel: int, stride: int = 1, relu: bool = True) -> int:
    in_ch = g.shape(x)[1]
    dt = g.dtype(x).name
    w = g.parameter("w", (out_ch, in_ch, kernel, kernel), dt, init="he_normal")
    (y,) = g.apply("conv2d", [x, w], name="conv", stride=stride, padding=kernel // 2)
    gamma = g.parameter("gamma", (out_ch,), dt, init="ones")
    beta = g.parameter("beta", (out_ch,), dt, init="zeros")
    mean = g.state("running_mean", (out_ch,), dt, init="zeros")
    var = g.state("running_var", (out_ch,), dt, init="ones")
    y = g.apply("batch_norm", [y, gamma, beta, mean, var], name="bn")[0]
    if relu:
        (y,) = g.apply("relu", [y], name="relu")
    return y


def residual_block(g: Graph, x: int, out_ch: int, stride: int) -> int:
    with g.scope("a"):
        y = conv_bn(g, x, out_ch, 3, stride)
    with g.scope("b"):
        y = conv_bn(g, y, out_ch, 3, 1, relu=False)
    if stride != 1 or g.shape(x)[1] != out_ch:
        with g.scope("proj"):
            x = conv_bn(g, x, out_ch, 1, stride, relu=False)
    (s,) = g.apply("add", [x, y], name="add")
    return g.apply("relu", [s], name="relu")[0]


def classifier_loss(g: Graph, features: int, classes: int, batch: int) -> int:
    dt = g.dtype(features).name
    w = g.parameter("fc_w", (classes, g.shape(features)[1]), dt, init="he_normal")
    b = g.parameter("fc_b", (classes,), dt, init="zeros")
    (logits,) = g.apply("fully_connected", [features, w, b], name="fc")
    labels = g.label("labels", (batch,))
    return g.apply("softmax_cross_entropy", [logits, labels], name="loss")[0]


def residual_cnn(batch: int = 16, image: int = 16, channels: int = 8, classes: int = 10,
                 stages: int = 2, dtype: str = "float32", sgd: SGD = SGD()) -> Graph:
    """conv-BN-ReLU stem, one residual block per stage (channels doubling, stride 2 after
    the first), global average pooling and a fully connected classifier."""
    g = Graph(f"residual-cnn-{stages}x{channels}")
    x = g.input("images", (batch, 3, image, image), dtype)
    with g.scope("stem"):
        x = conv_bn(g, x, channels, 3)
    for s in range(stages):
        with g.scope(f"stage{s}"):
            x = residual_block(g, x, channels << s, 1 if s == 0 else 2)
    (pooled,) = g.apply("global_avg_pool", [x], name="pool")
    loss = classifier_loss(g, pooled, classes, batch)
    return build_training_graph(g, loss, sgd)


def lstm_layer(g: Graph, xs: list[int], hidden: int) -> list[int]:
    """One LSTM layer over the sequence ``xs``; its weights are shared by every time step."""
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
            i, f, gg, o = g.apply("split", [gates], name="split", axis=1, sizes=(hidden,) * 4)
            (i,) = g.apply("sigmoid", [i], name="i")
            (o,) = g.apply("sigmoid", [o], name="o")
            (gg,) = g.apply("tanh", [gg], name="g")
            (c_new,) = g.apply("mul", [i, gg], name="ig")
            if c is not None:
                (f,) = g.apply("sigmoid", [f], name="f")
                (fc,) = g.apply("mul", [f, c], name="fc")
                (c_new,) = g.apply("add", [fc, c_new], name="c")
            c = c_new
            (tc,) = g.apply("tanh", [c], name="tanh_c")
            (h,) = g.apply("mul", [o, tc], name="h")
        hs.append(h)
    return hs


def lstm(batch: int = 8, steps: int = 6, features: int = 8, hidden: int = 16, layers: int = 2,
         classes: int = 5, dtype: str = "float32", sgd: SGD = SGD()) -> Graph:
    """A stack of LSTM layers over ``steps`` input vectors, classified from the last output."""
    g = Graph(f"lstm-{layers}x{hidden}")
    xs = [g.input(f"x{t}", (batch, features), dtype) for t in range(steps)]
    for layer in range(layers):
        with g.scope(f"lstm{layer}"):
            xs = lstm_layer(g, xs, hidden)
    loss = classifier_loss(g, xs[-1], classes, batch)
    return build_training_graph(g, loss, sgd)
