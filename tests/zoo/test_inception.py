import pytest

import zoo
from zoo.inception import inception

from .helpers import forward_operators, ops_by_name, parameter_count, train_once


def test_tiny_model_trains_one_iteration():
    train_once(zoo.tiny("inception"))


def test_images_smaller_than_the_stem_allows_are_refused():
    with pytest.raises(ValueError, match="at least 75x75"):
        inception(width=1, batch=1, size=64)


def test_width_1_is_inception_v4():
    g = inception(width=1, batch=1)
    # 149 convolutions: stem 11, A 4x7, reduction A 4, B 7x10, reduction B 6, C 3x10
    assert ops_by_name(g)["conv2d"] == 149
    assert parameter_count(g) == 42_679_816          # timm's inception_v4
    shapes = {g.tensors[n.outputs[0]].name.split("/")[0]: g.shape(n.outputs[0])
              for n in g.nodes if n.op == "concat" and g.tensors[n.outputs[0]].kind.name == "ACTIVATION"}
    assert shapes["stem"] == (1, 384, 35, 35)
    assert shapes["reduction_a"] == (1, 1024, 17, 17)
    assert shapes["reduction_b"] == (1, 1536, 8, 8)
    assert shapes["inception_c2"] == (1, 1536, 8, 8)


def test_paper_inception_4_builds_without_data():
    g = zoo.build("inception-4")         # batch 64, 299x299
    s = g.summary()
    # conv-BN-ReLU x 149 (a batch norm is two nodes: stats, apply), 18 pools, 19 concatenations,
    # pooling + classifier + loss
    assert forward_operators(g) == 149 * 4 + 18 + 19 + 3
    assert 15 * 42.5e6 < parameter_count(g) < 16.5 * 42.8e6      # convolutions 16x, the classifier 4x
    assert 0.5 < s.operators / 830 < 4
    assert 64 / 3 < s.distinct_sizes < 3 * 64
