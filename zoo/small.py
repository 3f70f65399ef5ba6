"""Small built-in models for tests and the default run: a residual CNN and a stacked LSTM.

They are made of the same blocks as the paper-scale builders (zoo.layers,
zoo.rnn), at sizes the numpy reference runs hundreds of iterations of in
seconds.
"""
from __future__ import annotations

from engine.autodiff import SGD, build_training_graph
from engine.ir import Graph

from .layers import conv_bn, cross_entropy, image_classifier_head, logits, relu
from .rnn import lstm_layer


def residual_block(g: Graph, x: int, out_ch: int, stride: int) -> int:
    y = conv_bn(g, x, out_ch, 3, stride, name="a")
    y = conv_bn(g, y, out_ch, 3, 1, relu_after=False, name="b")
    if stride != 1 or g.shape(x)[1] != out_ch:
        x = conv_bn(g, x, out_ch, 1, stride, relu_after=False, name="proj")
    (s,) = g.apply("add", [x, y], name="add")
    return relu(g, s)


def residual_cnn(batch: int = 16, image: int = 16, channels: int = 8, classes: int = 10,
                 stages: int = 2, dtype: str = "float32", sgd: SGD = SGD()) -> Graph:
    """conv-BN-ReLU stem, one residual block per stage (channels doubling, stride 2 after
    the first), global average pooling and a fully connected classifier."""
    g = Graph(f"residual-cnn-{stages}x{channels}")
    x = g.input("images", (batch, 3, image, image), dtype)
    x = conv_bn(g, x, channels, 3, name="stem")
    for s in range(stages):
        with g.scope(f"stage{s}"):
            x = residual_block(g, x, channels << s, 1 if s == 0 else 2)
    loss = cross_entropy(g, image_classifier_head(g, x, classes))
    return build_training_graph(g, loss, sgd)


def lstm(batch: int = 8, steps: int = 6, features: int = 8, hidden: int = 16, layers: int = 2,
         classes: int = 5, dtype: str = "float32", sgd: SGD = SGD()) -> Graph:
    """A stack of LSTM layers over ``steps`` input vectors, classified from the last output."""
    g = Graph(f"lstm-{layers}x{hidden}")
    xs = [g.input(f"x{t}", (batch, features), dtype) for t in range(steps)]
    for layer in range(layers):
        with g.scope(f"lstm{layer}"):
            xs = lstm_layer(g, xs, hidden)
    loss = cross_entropy(g, logits(g, xs[-1], classes))
    return build_training_graph(g, loss, sgd)
