"""ResNet-D for inference (the paper's serving experiments, Section 6.3): forward only.

The graph ends at the logits (its output, read back after each batch): no loss, no
backward, no update; the weights nothing updates are persistent state that is its own
next value (``engine.ir``), resident across batches when memory allows. Our only batch
norm is the training-mode operator, so each BN normalizes with the batch's own
statistics and also emits next values of its running statistics (STATE, as in
training). A deployed network would use the running statistics, or fold BN
into the convolution; the tensors it creates, which are what memory planning
sees, are the same except for BN's small per-channel outputs.
"""
from __future__ import annotations

from engine.graph_check import validate
from engine.ir import Graph

from .layers import image_classifier_head
from .wresnet import blocks_for_depth, features


def resnet(depth: int = 152, batch: int = 64, size: int = 224, classes: int = 1000,
           blocks: tuple[int, ...] | None = None, base_width: int = 64, dtype: str = "float32") -> Graph:
    """The forward pass of ResNet-``depth`` (bottleneck, conv-BN-ReLU) on ``size``x``size`` images."""
    blocks = tuple(blocks) if blocks is not None else blocks_for_depth(depth)
    g = Graph(f"resnet-{3 * sum(blocks) + 2}")
    images = g.input("images", (batch, 3, size, size), dtype)
    x = features(g, images, blocks, 1, base_width, in_place=True)   # BN, ReLU, sums over their inputs
    g.mark_output(image_classifier_head(g, x, classes))     # the logits, read back after each batch
    validate(g)
    return g
