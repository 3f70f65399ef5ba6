
import pytest

import zoo
from zoo.nasnet import nasnet

from .helpers import ops_by_name, parameter_count, train_once


def test_tiny_model_trains_one_iteration():
    g = zoo.tiny("nasnet")
    assert cells(g) == (3, 4)          # one normal cell per stage; two stem and two reduction cells
    train_once(g)


def cells(g):
    names = {n.name.split("/")[0] for n in g.nodes}
    normal = sum(1 for n in names if n.startswith("cell"))
    reduction = sum(1 for n in names if n.startswith(("reduction_cell", "stem_cell")))
    return normal, reduction


def test_nasnet_a_large_layout():
    g = nasnet(cells=6, batch=1)          # NASNet-A (6 @ 4032), 331x331
    assert cells(g) == (18, 4)
    assert parameter_count(g) == 88_753_150          # Keras NASNetLarge's trainable parameters
    (pooled,) = [n for n in g.nodes if n.op == "global_avg_pool"]
    assert g.shape(pooled.inputs[0]) == (1, 4032, 11, 11)


def test_separable_convolutions_are_depthwise_then_pointwise():
    g = zoo.tiny("nasnet")
    depthwise = [n for n in g.nodes if n.op == "conv2d" and n.attrs["groups"] > 1]
    assert depthwise and all(n.attrs["groups"] == g.shape(n.inputs[0])[1] for n in depthwise)
    for n in depthwise:
        (reader,) = [g.nodes[u] for u in g.users[n.outputs[0]] if g.nodes[u].op == "conv2d"]
        assert g.shape(reader.inputs[1])[2:] == (1, 1)


@pytest.mark.slow
def test_paper_nasnet_25_builds_without_data():
    g = zoo.build("nasnet-25")         # batch 64
    assert cells(g) == (75, 4)
    s = g.summary()
    assert 0.5 < s.operators / 5533 < 10
    assert 65 / 3 < s.distinct_sizes < 3 * 65
    assert ops_by_name(g)["sgd_update"] == len([t for t in g.leaves() if g.tensors[t].kind.name == "PARAMETER"])
