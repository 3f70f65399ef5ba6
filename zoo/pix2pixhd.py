"""Pix2PixHD's global generator (Wang et al. 2018): the second model of paper 001's Figures 4 and 5.

001 trains Pix2PixHD on Cityscapes at 512x1024, the setting of NVIDIA/pix2pixHD's label2city_512p,
whose generator is ``netG global`` with the repository's defaults (options/base_options.py): ngf 64,
n_downsample_global 4, n_blocks_global 9, instance norm without affine parameters, and an input of
label_nc 35 one-hot label channels plus 1 instance-edge channel. Its layers (models/networks.py,
GlobalGenerator):

    ReflectionPad(3), 7x7 conv (36 -> 64), IN, ReLU
    4 x [3x3/2 conv (c -> 2c), IN, ReLU]                         64 -> 1024 channels, 1/16 the size
    9 x ResnetBlock(1024): x + [RefPad(1), 3x3 conv, IN, ReLU, RefPad(1), 3x3 conv, IN]
    4 x [3x3/2 transposed conv (c -> c/2, output_padding 1), IN, ReLU]
    ReflectionPad(3), 7x7 conv (64 -> 3), tanh

PyTorch's convolutions there carry biases; a bias followed by instance norm is removed by the norm's
mean (its gradient is exactly zero), so only the last convolution keeps one here: the published
count less those cancelled biases (tests/zoo/test_pix2pixhd.py). What is modelled of the training
iteration: the generator's forward and backward passes and its SGD update, with an L1 loss between
its image and a target image. The repository's multiscale discriminators (two PatchGANs), their
update, the GAN and feature-matching losses and the VGG perceptual loss are not built, so the
memory and time here are the generator's alone (the largest part: its 1024-channel residual
blocks at 32x64 and its full-resolution layers).
"""
from __future__ import annotations

from engine.autodiff import SGD, build_training_graph
from engine.ir import Graph

from .layers import conv, relu

CITYSCAPES_CHANNELS = 35 + 1        # label_nc one-hot labels and the instance edge map


def instance_norm(g: Graph, x: int) -> int:
    return g.apply("instance_norm", [x], name="in")[0]


def reflect(g: Graph, x: int, pad: int) -> int:
    return g.apply("reflection_pad2d", [x], padding=pad)[0]      # unnamed: two to a residual block


def conv_in_relu(g: Graph, x: int, out_ch: int, kernel: int, stride: int, padding: int, name: str,
                 relu_after: bool = True) -> int:
    with g.scope(name):
        y = instance_norm(g, conv(g, x, out_ch, kernel, stride, padding))
        return relu(g, y) if relu_after else y


def residual_block(g: Graph, x: int) -> int:
    ch = g.shape(x)[1]
    y = conv_in_relu(g, reflect(g, x, 1), ch, 3, 1, 0, "conv1")
    y = conv_in_relu(g, reflect(g, y, 1), ch, 3, 1, 0, "conv2", relu_after=False)
    return g.apply("add", [x, y], name="add")[0]


def upsample(g: Graph, x: int, name: str) -> int:
    """3x3/2 transposed convolution to half the channels and twice the size, IN, ReLU."""
    ch = g.shape(x)[1]
    with g.scope(name):
        w = g.parameter("w", (ch, ch // 2, 3, 3), g.dtype(x).name, init="he_normal")
        (y,) = g.apply("conv_transpose2d", [x, w], name="deconv", stride=2, padding=1, output_padding=1)
        return relu(g, instance_norm(g, y))


def to_image(g: Graph, x: int, channels: int) -> int:
    """ReflectionPad(3), 7x7 convolution with a bias, tanh."""
    with g.scope("to_image"):
        y = conv(g, reflect(g, x, 3), channels, 7, 1, 0)
        b = g.parameter("b", (1, channels, 1, 1), g.dtype(x).name, init="zeros")
        (y,) = g.apply("binary", [y, b], name="bias", fn="add")
        return g.apply("tanh", [y], name="tanh")[0]


def l1_loss(g: Graph, image: int) -> int:
    """mean |image - target| against a fresh target input of the image's shape."""
    target = g.input("target", g.shape(image), g.dtype(image).name)
    (diff,) = g.apply("binary", [image, target], name="diff", fn="sub")
    (dist,) = g.apply("unary", [diff], name="abs", fn="abs")
    return g.apply("reduce", [dist], name="l1", fn="mean", axes=tuple(range(len(g.shape(image)))))[0]


def pix2pixhd(batch: int = 1, size: int = 512, ngf: int = 64, downsamples: int = 4, blocks: int = 9,
              in_channels: int = CITYSCAPES_CHANNELS, out_channels: int = 3, dtype: str = "float32",
              sgd: SGD = SGD()) -> Graph:
    """One training iteration of Pix2PixHD's global generator on ``size`` x 2*``size`` images
    (Cityscapes' aspect). ``ngf``, ``downsamples`` and ``blocks`` shrink it for tiny models."""
    if size % (1 << downsamples):
        raise ValueError(f"pix2pixhd: size {size} must be a multiple of 2^{downsamples} (the generator halves "
                         f"it {downsamples} times and doubles it back)")
    g = Graph(f"pix2pixhd-{ngf}-{downsamples}-{blocks}" if (ngf, downsamples, blocks) != (64, 4, 9) else "pix2pixhd")
    labels = g.input("labels", (batch, in_channels, size, 2 * size), dtype)
    x = conv_in_relu(g, reflect(g, labels, 3), ngf, 7, 1, 0, "stem")
    for i in range(downsamples):
        x = conv_in_relu(g, x, ngf << (i + 1), 3, 2, 1, f"down{i + 1}")
    for i in range(blocks):
        with g.scope(f"res{i + 1}"):
            x = residual_block(g, x)
    for i in range(downsamples):
        x = upsample(g, x, f"up{i + 1}")
    loss = l1_loss(g, to_image(g, x, out_channels))
    return build_training_graph(g, loss, sgd)
