import numpy as np
import pytest

import zoo
from engine import reference
from engine.initializers import initial_state
from engine.ir import Kind
from zoo.resnet import resnet

from .helpers import forward_operators, parameter_count, random_feeds

# torchvision's parameter counts (conv weights, BN gamma and beta, fc weight and bias)
TORCHVISION_PARAMETERS = {50: 25_557_032, 101: 44_549_160, 152: 60_192_808}


def test_tiny_inference_graph_runs_forward_only():
    g = zoo.tiny("resnet")
    assert g.loss is None
    assert all(g.tensors[t].kind != Kind.GRADIENT for t in range(len(g.tensors)))
    (logits,) = [n.outputs[0] for n in g.nodes if n.op == "fully_connected"]
    feeds = {**initial_state(g, seed=0), **random_feeds(g)}
    out = reference.run(g, feeds, keep=[logits])[logits]
    assert out.shape == (2, 10) and np.all(np.isfinite(out))


@pytest.mark.parametrize("depth", [50, 101, 152])
def test_parameter_counts_match_torchvision(depth):
    g = resnet(depth, batch=1)
    assert parameter_count(g) == TORCHVISION_PARAMETERS[depth]


def test_resnet_152_at_batch_64_has_the_expected_shape():
    g = zoo.build("resnet-152")
    # stem conv-BN-ReLU and pool; 50 blocks of 3 conv-BN, 2 ReLU, add, ReLU; 4 projections; head
    assert forward_operators(g) == len(g.nodes) == 4 + 50 * 10 + 4 * 2 + 2
    assert g.shape(g.leaves(Kind.INPUT)[0]) == (64, 3, 224, 224)
