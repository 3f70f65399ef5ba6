"""DenseNet-D (DenseNet-BC, Huang et al. 2017): the first model of paper 001's Figures 4 and 5.

Stem: 7x7/2 convolution (2 x growth channels), BN, ReLU, 3x3/2 max pool. Then four dense
blocks; a layer is BN-ReLU-1x1 convolution (4 x growth) then BN-ReLU-3x3 convolution (growth),
its output concatenated to its input along the channels. Between blocks a transition halves
the channels (BN-ReLU-1x1) and the resolution (2x2 average pool). Last: BN, ReLU, the
classifier. Each concatenation is a fresh tensor, as frameworks without DenseNet's shared
memory trick (NNabla's F.concatenate among them) allocate it: the activations grow with the
square of a block's depth, which is what makes DenseNet a swapping benchmark.
"""
from __future__ import annotations

from engine.autodiff import SGD, build_training_graph
from engine.ir import Graph

from .layers import avg_pool, batch_norm, concat, conv, cross_entropy, image_classifier_head, max_pool, relu

# depth: (layers per dense block, growth rate), the original paper's ImageNet configurations.
CONFIGS = {
    121: ((6, 12, 24, 16), 32),
    169: ((6, 12, 32, 32), 32),
    201: ((6, 12, 48, 32), 32),
    161: ((6, 12, 36, 24), 48),
}


def config_for_depth(depth: int) -> tuple[tuple[int, ...], int]:
    if depth not in CONFIGS:
        raise ValueError(f"no DenseNet of depth {depth}: use {', '.join(map(str, sorted(CONFIGS)))}")
    return CONFIGS[depth]


def bn_relu_conv(g: Graph, x: int, out_ch: int, kernel: int, name: str) -> int:
    """DenseNet's pre-activation unit."""
    with g.scope(name):
        return conv(g, relu(g, batch_norm(g, x)), out_ch, kernel)


def dense_layer(g: Graph, x: int, growth: int) -> int:
    """x concatenated with growth new channels made from it."""
    y = bn_relu_conv(g, x, 4 * growth, 1, "bottleneck")
    y = bn_relu_conv(g, y, growth, 3, "conv")
    return concat(g, [x, y])


def densenet(depth: int = 121, batch: int = 64, size: int = 224, classes: int = 1000,
             blocks: tuple[int, ...] | None = None, growth: int | None = None, dtype: str = "float32",
             sgd: SGD = SGD()) -> Graph:
    """One training iteration of DenseNet-``depth`` (forward, backward, SGD update). ``blocks``
    and ``growth`` override the configuration, for tiny models."""
    default_blocks, default_growth = config_for_depth(depth) if blocks is None or growth is None else ((), 0)
    blocks = tuple(blocks) if blocks is not None else default_blocks
    growth = growth if growth is not None else default_growth
    g = Graph(f"densenet-{2 * sum(blocks) + len(blocks) + 1}")   # convolutions, transitions, stem, classifier
    images = g.input("images", (batch, 3, size, size), dtype)
    with g.scope("stem"):
        x = relu(g, batch_norm(g, conv(g, images, 2 * growth, 7, 2)))
    x = max_pool(g, x, 3, 2, 1)
    for b, layers in enumerate(blocks):
        for i in range(layers):
            with g.scope(f"block{b + 1}/layer{i}"):
                x = dense_layer(g, x, growth)
        if b + 1 < len(blocks):
            with g.scope(f"transition{b + 1}"):
                x = avg_pool(g, bn_relu_conv(g, x, g.shape(x)[1] // 2, 1, "reduce"), 2, 2)
    with g.scope("final"):
        x = relu(g, batch_norm(g, x))
    loss = cross_entropy(g, image_classifier_head(g, x, classes))
    return build_training_graph(g, loss, sgd)
