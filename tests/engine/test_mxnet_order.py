"""engine.schedules.mxnet_order: MXNet's executor order (a post-order walk from the outputs)."""
import pytest

from engine.graph_check import check_order
from engine.schedules import mxnet_order, write_after_read_edges
from zoo import small
from zoo.rnn import rnn


def _positions(order):
    return {n: i for i, n in enumerate(order)}


@pytest.mark.parametrize("steps", [4, 10])        # 10 steps: the weights' sums take MXNet's add chain
def test_mxnet_order_is_a_schedule(steps):
    g = rnn(layers=2, hidden=16, batch=2, steps=steps, classes=5)
    order = mxnet_order(g)
    check_order(g, order)
    pos = _positions(order)
    assert all(pos[reader] < pos[update] for reader, update in write_after_read_edges(g))


def test_mxnet_order_interleaves_the_layers_of_an_unrolled_rnn():
    """The walk from the loss reaches every layer's step t before any layer's step t + 1, where
    insertion order (the zoo's) runs layer 0 over every step before layer 1 starts."""
    g = rnn(layers=2, hidden=16, batch=2, steps=5, classes=5)
    h = {(layer, t): g.node_id(f"layer{layer}/t{t}/h") for layer in range(2) for t in range(5)}
    pos = _positions(mxnet_order(g))
    for t in range(4):
        assert pos[h[1, t]] < pos[h[0, t + 1]]           # layer 1 at t before layer 0 at t + 1
        assert pos[h[0, t]] < pos[h[1, t]]
    assert h[0, 4] < h[1, 0]                             # insertion order: layer by layer
    # The backward interleaves too: layer 0's gradient at the last step before layer 1's at the first.
    grad = {layer: [pos[n.id] for n in g.nodes if n.name.startswith(f"layer{layer}/t") and ".grad/" in n.name]
            for layer in range(2)}
    assert min(grad[0]) < max(grad[1])


def test_forward_first_then_backward_then_updates():
    g = small.lstm(batch=2, steps=3, features=4, hidden=4, layers=2, classes=3)
    order = mxnet_order(g)
    pos = _positions(order)
    forward = range(g.producer[g.loss] + 1)             # the zoo builds the forward pass first
    updates = [g.producer[nxt] for cur, nxt in g.state_pairs if cur != nxt]
    grads = [n for n in range(len(g.nodes)) if n not in forward and n not in updates]
    assert max(pos[n] for n in forward) < min(pos[n] for n in grads)
    assert max(pos[n] for n in grads) < min(pos[u] for u in updates)


def test_one_gradients_nodes_run_together():
    """A fully connected layer's weight gradient is made beside its data gradient (MXNet's one
    _backward_FullyConnected node), not left for the end of the walk."""
    g = rnn(layers=2, hidden=16, batch=2, steps=4, classes=5)
    order = mxnet_order(g)
    pos = _positions(order)
    data = g.node_id(next(n.name for n in g.nodes if n.name.startswith("layer1/t3/fc_h.grad/fully_connected_grad_data")))
    weight = g.node_id(next(n.name for n in g.nodes if n.name.startswith("layer1/t3/fc_h.grad/fully_connected_grad_weight")))
    assert abs(pos[data] - pos[weight]) == 1
