"""zoo/pix2pixhd.py: Pix2PixHD's global generator, paper 001's Figure 4 and 5 model."""
import pytest

import zoo
from engine.ir import Kind
from zoo.pix2pixhd import pix2pixhd

from .helpers import ops_by_name, parameter_count, train_once
from .segmentation_checks import trains_bit_identically_while_swapping

# NVIDIA/pix2pixHD's GlobalGenerator with label2city_512p's options (models/networks.py,
# options/base_options.py: input 35 labels + 1 edge map, ngf 64, n_downsample_global 4,
# n_blocks_global 9): 182,546,755 parameters, of which 21,376 are the biases of the 26
# convolutions that instance norm follows (64 + 128+256+512+1024 + 18*1024 + 512+256+128+64),
# which the norm's mean cancels and the zoo leaves out.
PUBLISHED = 182_546_755
CANCELLED_BIASES = 64 + (128 + 256 + 512 + 1024) + 18 * 1024 + (512 + 256 + 128 + 64)


def test_tiny_model_trains_one_iteration():
    train_once(zoo.tiny("pix2pixhd"))


def test_the_global_generator_has_the_repository_s_parameters():
    g = zoo.build("pix2pixhd", batch=1)
    assert CANCELLED_BIASES == 21_376
    assert parameter_count(g) == PUBLISHED - CANCELLED_BIASES
    ops = ops_by_name(g)
    assert ops["conv_transpose2d"] == 4 and ops["reflection_pad2d"] == 2 + 2 * 9
    assert ops["instance_norm"] == 1 + 4 + 2 * 9 + 4 and ops["tanh"] == 1


def test_it_runs_on_001_s_cityscapes_images():
    g = zoo.build("pix2pixhd", batch=4)
    assert g.shape(g.leaves(Kind.INPUT)[0]) == (4, 36, 512, 1024)
    deepest = [g.shape(n.outputs[0]) for n in g.nodes if n.op == "add"][0]
    assert deepest == (4, 1024, 32, 64)                   # the residual blocks, at 1/16 of the image
    image = [g.shape(n.outputs[0]) for n in g.nodes if n.op == "tanh"][0]
    assert image == (4, 3, 512, 1024)


def test_a_size_the_generator_cannot_halve_is_one_line():
    with pytest.raises(ValueError, match="size 100 must be a multiple of 2\\^4"):
        pix2pixhd(batch=1, size=100)


def test_trains_bit_identically_while_swapping():
    assert trains_bit_identically_while_swapping(zoo.tiny("pix2pixhd")) > 0
