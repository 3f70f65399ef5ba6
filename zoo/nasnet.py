"""NasNet-R: NASNet-A, large ImageNet layout (Zoph et al. 2018), with R normal cells per stage.

Layout, as TF-slim's ``build_nasnet_large``: a 3x3/2 stem convolution; two
reduction cells at 1/4 and 1/2 of the filter count; then 3R normal cells with
a reduction cell (doubling the filters) before normal cell R and before 2R;
ReLU, global average pooling and a fully connected classifier. The paper's
NasNet-25 has 75 normal cells (original NASNet-A large: R = 6, 168 filters,
331x331 images).

Each cell first maps its input through ReLU-1x1 conv-BN and matches the
previous cell's output to it (a factorized reduction where the resolution
halves); then five combinations each add two operations applied to earlier
hidden states; unused hidden states are concatenated. A separable convolution
is applied twice per branch, each time ReLU, depthwise conv (groups = C),
pointwise 1x1 conv, BN.

Simplifications (none changes the order of magnitude of any tensor count or size):
- the factorized reduction's second path, which in TF samples the odd pixels
  (pad one pixel, crop, 1x1 pool of stride 2), is a 3x3 average pool of stride 2
  here: we have no pad or crop operator, and its output has the same shape;
- drop-path, dropout and the auxiliary head are left out (regularizers of
  training quality, not of memory);
- pools pad with one pixel (TF's "SAME"), so shapes match TF's.
"""
from __future__ import annotations

from engine.autodiff import SGD, build_training_graph
from engine.ir import Graph

from .layers import avg_pool, batch_norm, concat, conv, cross_entropy, image_classifier_head, max_pool, relu


class CellSpec:
    """Ten operations on the hidden states named by ``inputs`` (0: this cell's input, 1: the
    previous cell's, 2+: earlier combinations), added in pairs; states not ``used`` form the output."""

    def __init__(self, ops: tuple[str, ...], inputs: tuple[int, ...], used: tuple[int, ...]):
        self.ops, self.inputs, self.used = ops, inputs, used


NORMAL = CellSpec(("sep5", "sep3", "sep5", "sep3", "avg3", "none", "avg3", "avg3", "sep3", "none"),
                  (0, 1, 1, 1, 0, 1, 1, 1, 0, 0), (1, 0, 0, 0, 0, 0, 0))
REDUCTION = CellSpec(("sep5", "sep7", "max3", "sep7", "avg3", "sep5", "none", "avg3", "sep3", "max3"),
                     (0, 1, 0, 1, 0, 1, 3, 2, 2, 0), (1, 1, 1, 0, 0, 0, 0))


def relu_conv_bn(g: Graph, x: int, filters: int, stride: int = 1, name: str = "1x1") -> int:
    with g.scope(name):
        return batch_norm(g, conv(g, relu(g, x), filters, 1, stride))


def factorized_reduction(g: Graph, x: int, filters: int) -> int:
    """Halve the resolution with two strided 1x1 paths of filters/2 each, concatenated, then BN."""
    with g.scope("factorized_reduction"):
        x = relu(g, x)
        a = conv(g, avg_pool(g, x, 1, 2, name="pool1"), filters // 2, 1, name="path1")
        b = conv(g, avg_pool(g, x, 3, 2, 1, name="pool2"), filters - filters // 2, 1, name="path2")
        return batch_norm(g, concat(g, [a, b]))


def separable(g: Graph, x: int, filters: int, kernel: int, stride: int) -> int:
    """The separable branch applied twice: (ReLU, depthwise, pointwise, BN) x 2."""
    for i in (1, 2):
        with g.scope(f"sep{i}"):
            x = relu(g, x)
            x = conv(g, x, g.shape(x)[1], kernel, stride, groups=g.shape(x)[1], name="depthwise")
            x = batch_norm(g, conv(g, x, filters, 1, name="pointwise"))
        stride = 1
    return x


def operation(g: Graph, x: int, op: str, filters: int, stride: int) -> int:
    in_ch = g.shape(x)[1]
    if op.startswith("sep"):
        return separable(g, x, filters, int(op[3:]), stride)
    if op in ("avg3", "max3"):
        x = (avg_pool if op == "avg3" else max_pool)(g, x, 3, stride, 1)
        return batch_norm(g, conv(g, x, filters, 1)) if in_ch != filters else x
    if op == "none":
        return relu_conv_bn(g, x, filters, stride) if stride > 1 or in_ch != filters else x
    raise ValueError(f"unknown NASNet operation '{op}'")


def match_previous(g: Graph, prev: int, x: int, filters: int) -> int:
    """The previous cell's output brought to this cell's resolution and filter count."""
    if g.shape(prev)[2] != g.shape(x)[2]:
        return factorized_reduction(g, prev, filters)
    if g.shape(prev)[1] != filters:
        return relu_conv_bn(g, prev, filters, name="prev_1x1")
    return prev


def cell(g: Graph, spec: CellSpec, x: int, prev: int | None, filters: int, stride: int) -> int:
    prev = x if prev is None else match_previous(g, prev, x, filters)
    states = [relu_conv_bn(g, x, filters), prev]
    for i in range(5):
        with g.scope(f"comb{i}"):
            pair = []
            for side, k in (("left", 2 * i), ("right", 2 * i + 1)):
                src = spec.inputs[k]
                with g.scope(side):
                    # Only the cell's two inputs are strided; later states are already reduced.
                    pair.append(operation(g, states[src], spec.ops[k], filters, stride if src < 2 else 1))
            states.append(g.apply("add", pair, name="add")[0])
    return concat(g, [h for h, used in zip(states, spec.used) if not used])


def nasnet(cells: int = 25, batch: int = 64, size: int = 331, classes: int = 1000, filters: int = 168,
           stem_filters: int = 96, dtype: str = "float32", sgd: SGD = SGD()) -> Graph:
    """One training iteration of NasNet-``cells`` (``cells`` normal cells per stage; NASNet's N)."""
    g = Graph(f"nasnet-{cells}")
    images = g.input("images", (batch, 3, size, size), dtype)
    with g.scope("stem"):
        x = batch_norm(g, conv(g, images, stem_filters, 3, 2, padding=0))
    outputs = [None, x]
    for i, scale in enumerate((4, 2)):
        with g.scope(f"stem_cell{i}"):
            x = cell(g, REDUCTION, x, outputs[-2], filters // scale, 2)
        outputs.append(x)
    scale = 1
    for n in range(3 * cells):
        prev = outputs[-2]   # NASNet-A large skips a reduction cell's input (skip_reduction_layer_input)
        if n in (cells, 2 * cells):
            scale *= 2
            with g.scope(f"reduction_cell{n // cells - 1}"):
                x = cell(g, REDUCTION, x, outputs[-2], filters * scale, 2)
            outputs.append(x)
        with g.scope(f"cell{n}"):
            x = cell(g, NORMAL, x, prev, filters * scale, 1)
        outputs.append(x)
    loss = cross_entropy(g, image_classifier_head(g, relu(g, x, name="final_relu"), classes))
    return build_training_graph(g, loss, sgd)
