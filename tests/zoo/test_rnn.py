
import pytest

import zoo
from engine import reference
from engine.initializers import initial_state
from engine.ir import Kind
from zoo.rnn import DEFAULT_CLASSES, DEFAULT_STEPS, rnn

from .helpers import forward_operators, ops_by_name, random_feeds, train_once


@pytest.mark.parametrize("family", ["rnn", "brnn"])
def test_tiny_model_trains_one_iteration(family):
    train_once(zoo.tiny(family))


def test_every_step_of_a_layer_reads_the_same_weights():
    steps = 4
    g = rnn(layers=2, hidden=8, batch=2, steps=steps, classes=3)
    for layer in range(2):
        w_x = g.tensor_id(f"layer{layer}/w_x")
        w_h = g.tensor_id(f"layer{layer}/w_h")
        assert sum(g.nodes[u].op == "fully_connected" for u in g.users[w_x]) == steps
        assert sum(g.nodes[u].op == "fully_connected" for u in g.users[w_h]) == steps - 1  # h0 = 0
    # three tensors per layer and a shared classifier, each updated once
    assert len(g.leaves(Kind.PARAMETER)) == 2 * 3 + 2
    assert ops_by_name(g)["sgd_update"] == 8


def test_shared_weight_gradient_matches_finite_differences():
    """The gradient of a weight read at every step sums every step's contribution."""
    g = rnn(layers=1, hidden=3, batch=2, steps=3, classes=4, dtype="float64")
    w = g.tensor_id("layer0/w_h")
    (update,) = [g.nodes[u] for u in g.users[w] if g.nodes[u].op == "sgd_update"]
    grad = update.inputs[1]
    feeds = {**initial_state(g, seed=1), **random_feeds(g, seed=2)}
    analytic = reference.run(g, feeds, keep=[grad])[grad]

    def loss_at(wv):
        return float(reference.run(g, {**feeds, w: wv}, keep=[g.loss])[g.loss])

    eps = 1e-6
    for idx in [(0, 0), (5, 2), (11, 1)]:
        plus, minus = feeds[w].copy(), feeds[w].copy()
        plus[idx] += eps
        minus[idx] -= eps
        numeric = (loss_at(plus) - loss_at(minus)) / (2 * eps)
        assert numeric == pytest.approx(analytic[idx], rel=1e-5, abs=1e-8)


def test_bidirectional_layers_concatenate_both_directions():
    steps, hidden = 3, 4
    g = rnn(layers=2, hidden=hidden, batch=2, steps=steps, classes=3, bidirectional=True)
    assert g.shape(g.tensor_id("layer1/fwd/w_x")) == (4 * hidden, 2 * hidden)
    assert g.shape(g.tensor_id("layer1/bwd/w_x")) == (4 * hidden, 2 * hidden)
    assert ops_by_name(g)["concat"] >= 2 * steps
    # the backward sub-layer's first step reads the last input
    (first_bwd,) = [n for n in g.nodes if n.name == "layer0/bwd/t0/fc_x"]
    assert g.tensors[first_bwd.inputs[0]].name == f"x_t{steps - 1}"


def lstm_parameter_bytes(layers, hidden, input_width, classes, top_width):
    layer = lambda k: 4 * hidden * k + 4 * hidden * hidden + 4 * hidden
    first = layer(input_width)
    return 4 * (first + (layers - 1) * layer(top_width) + classes * top_width + classes)


def test_paper_rnn_8_8k_builds_without_data_and_matches_table_1_structure():
    g = zoo.build("rnn-8-8k")          # batch 256, the paper's
    h = 8 * 1024
    s = g.summary()
    assert g.shape(g.leaves(Kind.INPUT)[0]) == (256, h)
    assert len(g.leaves(Kind.INPUT)) == DEFAULT_STEPS
    params = sum(g.tensors[t].nbytes for t in g.leaves(Kind.PARAMETER))
    assert params == lstm_parameter_bytes(8, h, h, DEFAULT_CLASSES, h)     # about 17.2 GB
    # 13 forward operators per cell (8 in the first, whose h and c are zero), then the classifier
    assert forward_operators(g) == 8 * (13 * DEFAULT_STEPS - 5) + 2 * DEFAULT_STEPS + 2
    assert 0.5 < s.operators / 8594 < 2           # the paper's operator count
    assert s.distinct_sizes == 7                  # as in the paper


def test_paper_brnn_4_8k_builds_without_data_and_matches_table_1_structure():
    g = zoo.build("brnn-4-8k")         # batch 128
    h = 8 * 1024
    s = g.summary()
    params = sum(g.tensors[t].nbytes for t in g.leaves(Kind.PARAMETER))
    per_direction = lstm_parameter_bytes(4, h, h, DEFAULT_CLASSES, 2 * h) - 4 * (DEFAULT_CLASSES * 2 * h + DEFAULT_CLASSES)
    assert params == 2 * per_direction + 4 * (DEFAULT_CLASSES * 2 * h + DEFAULT_CLASSES)
    assert 0.5 < s.operators / 9034 < 2
    assert s.distinct_sizes == 9                  # as in the paper: the 2H-wide inputs add two sizes
