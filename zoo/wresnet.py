"""WResNet-D-X: the bottleneck ResNet of depth D with every convolution X times wider.

As in the paper (Section 6.1), the widening multiplies the channel count of
every convolution, the 7x7 stem included, and the images keep ImageNet's size
(224x224) rather than the CIFAR size of the original wide-ResNet work. Each
unit is conv-BN-ReLU (ResNet v1); a stage's first block changes width and, in
stages 2-4, halves the resolution on its 3x3 convolution (as MXNet's ResNet
does), with a 1x1 projection shortcut.
"""
from __future__ import annotations

from engine.autodiff import SGD, build_training_graph
from engine.ir import Graph

from .layers import conv_bn, cross_entropy, image_classifier_head, max_pool, relu, widen

BLOCKS_PER_STAGE = {
    50: (3, 4, 6, 3),
    101: (3, 4, 23, 3),
    152: (3, 8, 36, 3),
    200: (3, 24, 36, 3),
}


def blocks_for_depth(depth: int) -> tuple[int, ...]:
    """Blocks per stage of a bottleneck ResNet of ``depth`` layers (3 convolutions a block,
    plus the stem and the classifier). Depths not in the original paper (14, 26, 38, ...)
    spread their blocks evenly over the four stages."""
    if depth in BLOCKS_PER_STAGE:
        return BLOCKS_PER_STAGE[depth]
    if depth >= 14 and (depth - 2) % 12 == 0:
        return ((depth - 2) // 12,) * 4
    raise ValueError(f"no bottleneck ResNet of depth {depth}: use 50, 101, 152, 200 "
                     "or 12k+2 (14, 26, 38, ...)")


def bottleneck(g: Graph, x: int, width: int, stride: int, in_place: bool = False, dilation: int = 1) -> int:
    """1x1 (width) -> 3x3 (width, stride, ``dilation``) -> 1x1 (4 x width), added to the shortcut
    (``in_place``: BN, ReLU and the sum may overwrite their inputs, for inference graphs)."""
    out_ch = 4 * width
    y = conv_bn(g, x, width, 1, name="conv1", in_place=in_place)
    y = conv_bn(g, y, width, 3, stride, name="conv2", in_place=in_place, dilation=dilation)
    y = conv_bn(g, y, out_ch, 1, relu_after=False, name="conv3", in_place=in_place)
    shortcut = x
    if stride != 1 or g.shape(x)[1] != out_ch:
        shortcut = conv_bn(g, x, out_ch, 1, stride, relu_after=False, name="projection", in_place=in_place)
    (s,) = g.apply("add", [shortcut, y], name="add", **({"in_place": True} if in_place else {}))
    return relu(g, s, in_place=in_place)


def features(g: Graph, images: int, blocks: tuple[int, ...], width: float, base_width: int = 64,
             in_place: bool = False) -> int:
    """The convolutional trunk: stem, then the bottleneck stages; returns the last activation
    (``in_place``: element-wise operators may overwrite their inputs, for inference graphs)."""
    x = conv_bn(g, images, widen(base_width, width), 7, 2, name="stem", in_place=in_place)
    x = max_pool(g, x, 3, 2, 1)
    for s, n in enumerate(blocks):
        for b in range(n):
            with g.scope(f"stage{s + 1}/block{b}"):
                stride = 2 if s > 0 and b == 0 else 1
                x = bottleneck(g, x, widen(base_width << s, width), stride, in_place)
    return x


def wresnet(depth: int = 152, width: float = 10, batch: int = 64, size: int = 224, classes: int = 1000,
            blocks: tuple[int, ...] | None = None, base_width: int = 64, dtype: str = "float32",
            sgd: SGD = SGD()) -> Graph:
    """One training iteration of WResNet-``depth``-``width`` (forward, backward, SGD update).
    ``blocks`` overrides the blocks per stage and ``base_width`` the stem's channels (64),
    for tiny configurations."""
    blocks = tuple(blocks) if blocks is not None else blocks_for_depth(depth)
    g = Graph(f"wresnet-{3 * sum(blocks) + 2}-{width:g}")
    images = g.input("images", (batch, 3, size, size), dtype)
    x = features(g, images, blocks, width, base_width)
    loss = cross_entropy(g, image_classifier_head(g, x, classes))
    return build_training_graph(g, loss, sgd)
