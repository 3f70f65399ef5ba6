"""DeepLabv3+ (Chen et al. 2018): the third model of paper 001's Figures 4 and 5.

001 trains it on PASCAL VOC crops of 513x513 without naming the backbone; the PyTorch DeepLabv3+
of that size (jfzhang95/pytorch-deeplab-xception, crop 513, output stride 16, ResNet-101 by
default) is the one modelled here:

- backbone: ResNet-101 (bottlenecks, stride on the 3x3 as torchvision's), strides 1, 2, 2, 1 and,
  for output stride 16, the last stage dilated instead of strided, its three blocks at dilation
  2 x (1, 2, 4) (the multi-grid of DeepLabv3);
- ASPP on the 2048-channel features (33x33 for a 513 crop): a 1x1 convolution, three 3x3
  convolutions at rates 6, 12 and 18, and image pooling (global average, 1x1 convolution,
  bilinear upsampling back), each to 256 channels with BN and ReLU, concatenated and projected
  by a 1x1 convolution to 256 (BN, ReLU);
- decoder: the stage-1 features (256 channels, 129x129) reduced to 48 by a 1x1 convolution, the
  ASPP output upsampled to them and concatenated, two 3x3 convolutions of 256, a 1x1 classifier
  with bias (21 classes), upsampled to the crop;
- loss: per-pixel softmax cross-entropy (the logits moved to [N*H*W, classes] by a transpose).

Every upsampling is bilinear with align_corners=True, as that repository's. Its dropout layers
(0.5 after ASPP, 0.5 and 0.1 in the decoder) are left out: the engine has no random operators;
they would add a mask per dropped tensor, not change the shapes. The backbone and ASPP have
torchvision's deeplabv3_resnet101 parameters, checked in tests/zoo/test_deeplab.py.
"""
from __future__ import annotations

from engine.autodiff import SGD, build_training_graph
from engine.ir import Graph

from .layers import concat, conv, conv_bn, max_pool
from .wresnet import bottleneck

RESNET101 = (3, 4, 23, 3)
MULTI_GRID = (1, 2, 4)
ASPP_RATES = (6, 12, 18)


def upsample(g: Graph, x: int, hw) -> int:
    return g.apply("upsample_bilinear2d", [x], name="upsample", size=tuple(hw), align_corners=True)[0]


def backbone(g: Graph, images: int, blocks, base_width: int) -> tuple[int, int]:
    """The ResNet at output stride 16: (stage-1 features, last features)."""
    x = conv_bn(g, images, base_width, 7, 2, name="stem")
    x = max_pool(g, x, 3, 2, 1)
    low = x
    for s, n in enumerate(blocks):
        for b in range(n):
            with g.scope(f"stage{s + 1}/block{b}"):
                stride = 2 if s in (1, 2) and b == 0 else 1
                dilation = 2 * MULTI_GRID[b % len(MULTI_GRID)] if s == 3 else 1
                x = bottleneck(g, x, base_width << s, stride, dilation=dilation)
        if s == 0:
            low = x
    return low, x


def aspp(g: Graph, x: int, channels: int) -> int:
    hw = g.shape(x)[2:]
    with g.scope("aspp"):
        branches = [conv_bn(g, x, channels, 1, name="conv1x1")]
        branches += [conv_bn(g, x, channels, 3, dilation=r, name=f"rate{r}") for r in ASPP_RATES]
        with g.scope("image_pool"):
            (pooled,) = g.apply("global_avg_pool", [x], name="pool")
            (pooled,) = g.apply("reshape", [pooled], name="as_image", shape=(*g.shape(pooled), 1, 1))
            branches.append(upsample(g, conv_bn(g, pooled, channels, 1, name="conv"), hw))
        return conv_bn(g, concat(g, branches), channels, 1, name="project")


def decoder(g: Graph, x: int, low: int, classes: int, channels: int, low_channels: int) -> int:
    with g.scope("decoder"):
        low = conv_bn(g, low, low_channels, 1, name="reduce")
        x = concat(g, [upsample(g, x, g.shape(low)[2:]), low])
        x = conv_bn(g, x, channels, 3, name="conv1")
        x = conv_bn(g, x, channels, 3, name="conv2")
        with g.scope("classifier"):
            y = conv(g, x, classes, 1)
            b = g.parameter("b", (1, classes, 1, 1), g.dtype(x).name, init="zeros")
            return g.apply("binary", [y, b], name="bias", fn="add")[0]


def pixel_cross_entropy(g: Graph, logits: int) -> int:
    """Mean softmax cross-entropy over every pixel against a fresh label per pixel."""
    n, c, h, w = g.shape(logits)
    (rows,) = g.apply("transpose", [logits], name="channels_last", axes=(0, 2, 3, 1))
    (rows,) = g.apply("reshape", [rows], name="pixels", shape=(n * h * w, c))
    labels = g.label("loss_labels", (n, h, w))            # a class per pixel, the batch first as data is drawn
    (labels,) = g.apply("reshape", [labels], name="label_rows", shape=(n * h * w,))
    return g.apply("softmax_cross_entropy", [rows, labels], name="loss")[0]


def deeplabv3plus(batch: int = 6, size: int = 513, classes: int = 21, blocks=RESNET101, base_width: int = 64,
                  aspp_channels: int = 256, low_channels: int = 48, dtype: str = "float32",
                  sgd: SGD = SGD()) -> Graph:
    """One training iteration of DeepLabv3+ (ResNet-``3*sum(blocks)+2`` backbone, output stride 16)
    on ``size`` x ``size`` crops. ``blocks``, ``base_width`` and the channel counts shrink it for
    tiny models."""
    blocks = tuple(blocks)
    if len(blocks) != 4 or min(blocks) < 1:
        raise ValueError(f"deeplabv3plus: blocks must be four positive counts (ResNet stages), got {blocks}")
    if batch < 2:
        raise ValueError("deeplabv3plus: batch must be at least 2: the image-pooling branch's batch norm sees one "
                         "value per channel per sample (PyTorch refuses it in training mode too)")
    depth = 3 * sum(blocks) + 2
    g = Graph("deeplabv3plus" if (blocks, base_width) == (RESNET101, 64) else f"deeplabv3plus-r{depth}-{base_width}")
    images = g.input("images", (batch, 3, size, size), dtype)
    low, x = backbone(g, images, blocks, base_width)
    x = aspp(g, x, aspp_channels)
    logits = upsample(g, decoder(g, x, low, classes, aspp_channels, low_channels), (size, size))
    return build_training_graph(g, pixel_cross_entropy(g, logits), sgd)
