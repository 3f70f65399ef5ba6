
import pytest

import zoo
from zoo.wresnet import blocks_for_depth, wresnet

from .helpers import forward_operators, ops_by_name, parameter_count, train_once


def test_tiny_model_trains_one_iteration():
    train_once(zoo.tiny("wresnet"))


def test_depths():
    assert blocks_for_depth(152) == (3, 8, 36, 3)
    assert blocks_for_depth(101) == (3, 4, 23, 3)
    assert blocks_for_depth(50) == (3, 4, 6, 3)
    assert blocks_for_depth(14) == (1, 1, 1, 1) and blocks_for_depth(26) == (2, 2, 2, 2)
    with pytest.raises(ValueError, match="depth 33"):
        blocks_for_depth(33)


def test_width_multiplies_every_convolution():
    narrow = wresnet(blocks=(1, 1, 1, 1), width=1, batch=2, size=32, classes=10)
    wide = wresnet(blocks=(1, 1, 1, 1), width=2, batch=2, size=32, classes=10)
    convs = lambda g: [g.shape(n.inputs[1]) for n in g.nodes if n.op == "conv2d"]
    for (o1, i1, *k1), (o2, i2, *k2) in zip(convs(narrow), convs(wide)):
        assert o2 == 2 * o1 and (i2 == 2 * i1 or i1 == i2 == 3) and k1 == k2
    assert wide.name == "wresnet-14-2"


def test_custom_blocks_and_base_width():
    g = wresnet(blocks=(2, 1), base_width=8, width=1, batch=1, size=32, classes=10)
    assert ops_by_name(g)["add"] >= 3
    assert g.shape(g.tensor_id("stage2/block0/conv3/conv/w")) == (64, 16, 1, 1)


def test_paper_wresnet_152_10_builds_without_data():
    g = zoo.build("wresnet-152-10")      # batch 64, 224x224
    s = g.summary()
    # as ResNet-152 (stem, 50 bottlenecks, 4 projections; a batch norm is two nodes: stats,
    # apply), plus the loss
    assert forward_operators(g) == 5 + 50 * 13 + 4 * 3 + 3
    # every convolution 10 times wider: about 100 times ResNet-152's 58M conv weights
    assert 5.5e9 < parameter_count(g) < 6.5e9
    assert 0.5 < s.operators / 882 < 3                            # the paper's 882 operators
    assert s.distinct_sizes < 3 * 26
