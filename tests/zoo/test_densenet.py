"""zoo/densenet.py: DenseNet-BC, paper 001's Figure 4 and 5 model."""
import pytest

import zoo
from engine.ir import Kind
from zoo.densenet import CONFIGS, config_for_depth, densenet

from .helpers import ops_by_name, train_once


def test_tiny_model_trains_one_iteration():
    train_once(zoo.tiny("densenet"))


def test_depths_and_their_names():
    assert config_for_depth(121) == ((6, 12, 24, 16), 32) and config_for_depth(161)[1] == 48
    with pytest.raises(ValueError, match="depth 50"):
        zoo.build("densenet-50", batch=1)
    for depth in CONFIGS:        # the name counts the layers as the paper does: it is the depth
        assert zoo.build(f"densenet-{depth}", batch=2, size=32).name == f"densenet-{depth}"


def test_each_layer_concatenates_growth_channels_and_transitions_halve():
    g = densenet(blocks=(3, 2), growth=4, batch=1, size=32, classes=10)
    concats = [g.shape(n.outputs[0])[1] for n in g.nodes if n.op == "concat"]
    # stem 2k = 8 channels; block 1: 12, 16, 20; transition: 10; block 2: 14, 18
    assert concats[:5] == [12, 16, 20, 14, 18]
    assert ops_by_name(g)["avg_pool2d"] == 1              # one transition between two blocks


def test_densenet_121_at_224_is_the_papers_size():
    g = zoo.build("densenet-121", batch=2)
    convs = [n for n in g.nodes if n.op == "conv2d"]
    assert len(convs) == 120                              # stem, 2 a layer (58 layers), 3 transitions
    assert g.shape(g.leaves(Kind.INPUT)[0]) == (2, 3, 224, 224)
