"""Inception-X: Inception-V4 (Szegedy et al. 2016, Figures 3-9) with every convolution
X times wider, as the paper widens it (Section 6.1).

Layout: stem; 4 Inception-A; Reduction-A; 7 Inception-B; Reduction-B;
3 Inception-C; global average pooling; fully connected. Every convolution is
conv-BN-ReLU; "V" convolutions and pools of the figures are unpadded, the rest
keep the resolution. Dropout before the classifier is left out (it changes no
tensor size). The default input is Inception-V4's own 299x299; any side of at
least 75 works (the stem's unpadded layers need it), which is how the tiny
configuration runs on the numpy interpreter.
"""
from __future__ import annotations

from engine.autodiff import SGD, build_training_graph
from engine.ir import Graph

from .layers import avg_pool, concat, conv_bn, cross_entropy, image_classifier_head, max_pool, widen

MIN_SIZE = 75


class _Widened:
    """conv-BN-ReLU with the channel count scaled by the wide factor, and a fresh scope name."""

    def __init__(self, g: Graph, width: float):
        self.g, self.width, self.count = g, width, 0

    def __call__(self, x: int, ch: int, kernel, stride=1, valid: bool = False) -> int:
        self.count += 1
        return conv_bn(self.g, x, widen(ch, self.width), kernel, stride,
                       padding=0 if valid else None, name=f"conv{self.count}")


def stem(g: Graph, x: int, cbr: _Widened) -> int:
    x = cbr(x, 32, 3, 2, valid=True)
    x = cbr(x, 32, 3, valid=True)
    x = cbr(x, 64, 3)
    x = concat(g, [max_pool(g, x, 3, 2), cbr(x, 96, 3, 2, valid=True)], name="concat1")
    a = cbr(cbr(x, 64, 1), 96, 3, valid=True)
    b = cbr(x, 64, 1)
    b = cbr(b, 64, (7, 1))
    b = cbr(b, 64, (1, 7))
    b = cbr(b, 96, 3, valid=True)
    x = concat(g, [a, b], name="concat2")
    return concat(g, [cbr(x, 192, 3, 2, valid=True), max_pool(g, x, 3, 2)], name="concat3")


def inception_a(g: Graph, x: int, cbr: _Widened) -> int:
    pool = cbr(avg_pool(g, x, 3, 1, 1), 96, 1)
    one = cbr(x, 96, 1)
    three = cbr(cbr(x, 64, 1), 96, 3)
    double = cbr(cbr(cbr(x, 64, 1), 96, 3), 96, 3)
    return concat(g, [pool, one, three, double])


def reduction_a(g: Graph, x: int, cbr: _Widened) -> int:
    three = cbr(x, 384, 3, 2, valid=True)
    double = cbr(cbr(cbr(x, 192, 1), 224, 3), 256, 3, 2, valid=True)
    return concat(g, [max_pool(g, x, 3, 2), three, double])


def inception_b(g: Graph, x: int, cbr: _Widened) -> int:
    pool = cbr(avg_pool(g, x, 3, 1, 1), 128, 1)
    one = cbr(x, 384, 1)
    seven = cbr(cbr(cbr(x, 192, 1), 224, (1, 7)), 256, (7, 1))
    double = cbr(x, 192, 1)
    for ch, k in ((192, (1, 7)), (224, (7, 1)), (224, (1, 7)), (256, (7, 1))):
        double = cbr(double, ch, k)
    return concat(g, [pool, one, seven, double])


def reduction_b(g: Graph, x: int, cbr: _Widened) -> int:
    three = cbr(cbr(x, 192, 1), 192, 3, 2, valid=True)
    seven = cbr(cbr(cbr(x, 256, 1), 256, (1, 7)), 320, (7, 1))
    seven = cbr(seven, 320, 3, 2, valid=True)
    return concat(g, [max_pool(g, x, 3, 2), three, seven])


def inception_c(g: Graph, x: int, cbr: _Widened) -> int:
    pool = cbr(avg_pool(g, x, 3, 1, 1), 256, 1)
    one = cbr(x, 256, 1)
    mid = cbr(x, 384, 1)
    deep = cbr(cbr(cbr(x, 384, 1), 448, (3, 1)), 512, (1, 3))
    forks = [cbr(mid, 256, (1, 3)), cbr(mid, 256, (3, 1)), cbr(deep, 256, (1, 3)), cbr(deep, 256, (3, 1))]
    return concat(g, [pool, one, *forks])


STAGES = ((inception_a, "inception_a"), (reduction_a, "reduction_a"),
          (inception_b, "inception_b"), (reduction_b, "reduction_b"), (inception_c, "inception_c"))


def inception(width: float = 4, batch: int = 64, size: int = 299, classes: int = 1000,
              blocks: tuple[int, int, int] = (4, 7, 3), dtype: str = "float32", sgd: SGD = SGD()) -> Graph:
    """One training iteration of Inception-``width``; ``blocks`` counts the A, B and C cells."""
    if size < MIN_SIZE:
        raise ValueError(f"Inception-V4 needs images of at least {MIN_SIZE}x{MIN_SIZE}, got {size}x{size}")
    g = Graph(f"inception-{width:g}")
    x = g.input("images", (batch, 3, size, size), dtype)
    with g.scope("stem"):
        x = stem(g, x, _Widened(g, width))
    repeats = dict(zip(("inception_a", "inception_b", "inception_c"), blocks))
    for cell, name in STAGES:
        for i in range(repeats.get(name, 1)):
            with g.scope(f"{name}{i}" if name in repeats else name):
                x = cell(g, x, _Widened(g, width))
    loss = cross_entropy(g, image_classifier_head(g, x, classes))
    return build_training_graph(g, loss, sgd)
