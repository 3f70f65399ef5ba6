"""Common expressions built once (engine/ir.py ``Graph.apply``, as MXNet's executor does before
building a gradient): a pure operator on the same inputs and attributes is one node; anything
whose outputs depend on more than its inputs, or differs in an attribute, is built again."""
import numpy as np

import zoo
from engine import reference
from engine.autodiff import SGD, build_training_graph
from engine.initializers import initial_state
from engine.ir import Graph


def twin_relus(common_expr: bool = True):
    """NASNet's pattern: two ReLUs of one tensor, each read by its own convolution."""
    g = Graph("twins", common_expr=common_expr)
    x = g.input("x", (2, 3, 6, 6), "float64")
    w1 = g.parameter("w1", (4, 3, 1, 1), "float64", init="normal:0.5")
    w2 = g.parameter("w2", (4, 3, 1, 1), "float64", init="normal:0.5")
    (a,) = g.apply("relu", [x], name="left/relu")
    (b,) = g.apply("relu", [x], name="right/relu")
    (ca,) = g.apply("conv2d", [a, w1], name="left/conv")
    (cb,) = g.apply("conv2d", [b, w2], name="right/conv")
    (s,) = g.apply("add", [ca, cb], name="sum")
    (pooled,) = g.apply("global_avg_pool", [s], name="pool")
    labels = g.label("labels", (2,))
    loss, _ = g.apply("softmax_cross_entropy", [pooled, labels], name="loss")
    return g, loss, a, b


def test_a_pure_operator_on_the_same_inputs_is_built_once():
    g, _, a, b = twin_relus()
    assert a == b
    assert [n.op for n in g.nodes].count("relu") == 1
    kept, _, a2, b2 = twin_relus(common_expr=False)
    assert a2 != b2 and [n.op for n in kept.nodes].count("relu") == 2


def test_other_attributes_or_other_inputs_are_built_again():
    g = Graph("different")
    x = g.input("x", (2, 3, 8, 8))
    y = g.input("y", (2, 3, 8, 8))
    assert g.apply("avg_pool2d", [x], kernel=3, stride=1, padding=1) != \
        g.apply("avg_pool2d", [x], kernel=3, stride=2, padding=1)
    assert g.apply("relu", [x]) != g.apply("relu", [y])
    assert g.apply("add", [x, y]) != g.apply("add", [y, x])      # operands in another order: not matched
    assert g.apply("max_pool2d", [x], kernel=3, stride=1, padding=1) == \
        g.apply("max_pool2d", [x], name="again", kernel=3, stride=1, padding=1)   # another name: the same node
    assert "again" not in {n.name for n in g.nodes}


def test_batch_norm_statistics_are_built_for_each_call():
    """Statistics update running state: each call is a node of its own (and the second update of
    one state is refused, as before)."""
    g = Graph("stats")
    x = g.input("x", (2, 3, 8, 8))
    means = [g.state(f"mean{i}", (3,)) for i in range(2)]
    vars_ = [g.state(f"var{i}", (3,)) for i in range(2)]
    first = g.apply("batch_norm_stats", [x, means[0], vars_[0]])
    second = g.apply("batch_norm_stats", [x, means[1], vars_[1]])
    assert set(first).isdisjoint(second) and len(g.nodes) == 2


def test_stateful_operators_are_never_merged():
    g = Graph("updates")
    w = g.parameter("w", (4,), init="ones")
    grad = g.input("grad", (4,))
    m1, m2 = g.state("m1", (4,)), g.state("m2", (4,))
    first = g.apply("sgd_update", [w, grad, m1], lr=0.1, momentum=0.9, weight_decay=0.0)
    w2 = g.parameter("w2", (4,), init="ones")
    second = g.apply("sgd_update", [w2, grad, m2], lr=0.1, momentum=0.9, weight_decay=0.0)
    assert first != second
    assert len(g.nodes) == 2


def test_the_merged_graph_computes_the_same_loss_and_gradients():
    """One ReLU read twice: the loss bit for bit, the gradients to rounding (two contributions are
    summed before the ReLU's backward instead of after two)."""
    values = []
    for common in (True, False):
        g, loss, _, _ = twin_relus(common)
        build_training_graph(g, loss, SGD(lr=0.1))
        rng = np.random.default_rng(0)
        feeds = {**initial_state(g, 0), g.tensor_id("x"): rng.standard_normal((2, 3, 6, 6)),
                 g.tensor_id("labels"): np.array([0, 3], dtype=np.int32)}
        out = reference.run(g, feeds)
        nxt = {g.tensors[c].name: out[n] for c, n in g.state_pairs if c != n}
        values.append((out[loss], nxt))
    (loss_a, state_a), (loss_b, state_b) = values
    assert loss_a == loss_b
    assert state_a.keys() == state_b.keys()
    for name in state_a:
        np.testing.assert_allclose(state_a[name], state_b[name], rtol=1e-12, atol=1e-15, err_msg=name)


def test_nasnet_builds_each_relu_of_a_hidden_state_once():
    """Measured 2026-11-26: NasNet-25 at batch 64 has 312 ReLUs (and 75 average pools) fewer,
    15458 -> 14676 nodes."""
    g = zoo.build("nasnet-1", batch=2, size=64)
    seen = set()
    for n in g.nodes:
        if n.op == "relu":
            assert n.inputs not in seen, n.name
            seen.add(n.inputs)
