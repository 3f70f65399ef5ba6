import numpy as np
import pytest

from engine import reference
from engine.autodiff import SGD, build_training_graph, gradients
from engine.initializers import initial_state
from engine.ir import Graph, GraphError, Kind


def mlp(dtype="float64"):
    g = Graph("mlp")
    x = g.input("x", (5, 4), dtype)
    w1 = g.parameter("w1", (6, 4), dtype, init="normal:0.5")
    b1 = g.parameter("b1", (6,), dtype, init="normal:0.1")
    w2 = g.parameter("w2", (3, 6), dtype, init="normal:0.5")
    (h,) = g.apply("fully_connected", [x, w1, b1], name="fc1")
    (a,) = g.apply("tanh", [h], name="act")
    (r,) = g.apply("mul", [a, a], name="square")        # a is read twice: two contributions
    (s,) = g.apply("add", [r, a], name="skip")
    (logits,) = g.apply("fully_connected", [s, w2], name="fc2")
    labels = g.label("labels", (5,))
    loss, _ = g.apply("softmax_cross_entropy", [logits, labels], name="loss")
    return g, loss


def test_whole_graph_gradient_matches_finite_differences():
    g, loss = mlp()
    grads = gradients(g, loss)
    rng = np.random.default_rng(0)
    feeds = {**initial_state(g, 0), g.tensor_id("x"): rng.standard_normal((5, 4)),
             g.tensor_id("labels"): rng.integers(0, 3, 5).astype(np.int32)}
    out = reference.run(g, feeds)
    for p, gp in grads.items():
        for idx in list(np.ndindex(g.shape(p)))[:6]:
            plus, minus = dict(feeds), dict(feeds)
            plus[p] = feeds[p].copy()
            minus[p] = feeds[p].copy()
            plus[p][idx] += 1e-6
            minus[p][idx] -= 1e-6
            numeric = (reference.run(g, plus, keep=[loss])[loss] - reference.run(g, minus, keep=[loss])[loss]) / 2e-6
            assert abs(out[gp][idx] - numeric) < 1e-6 * max(1, abs(numeric)), g.tensors[p].name


def test_contributions_are_summed_in_a_fixed_order():
    g, loss = mlp()
    gradients(g, loss)
    (s,) = [n for n in g.nodes if n.name == "act.grad_sum"]
    (a,) = [n for n in g.nodes if n.name.startswith("act.grad_acc")]
    assert s.op == "sum_n" and a.op == "accumulate" and a.inputs[0] == s.outputs[0]
    # three contributions: from square (twice: a*a) and from skip
    assert all(g.tensors[t].kind == Kind.GRADIENT for t in (*s.inputs, *a.inputs, *a.outputs))
    g2, loss2 = mlp()
    gradients(g2, loss2)
    assert g.dump() == g2.dump()            # the same graph, operand order included
    (reader,) = [g.nodes[u] for u in g.users[a.outputs[0]]]
    assert reader.op == "tanh_grad"       # the summed gradient flows on into tanh's backward


def test_backward_nodes_read_only_the_forward_tensors_they_need():
    g, loss = mlp()
    n_forward = len(g.nodes)
    gradients(g, loss)
    x = g.tensor_id("x")
    # x feeds the first layer only; its gradient is not needed, so no backward node reads x
    # except the weight gradient of fc1
    readers = [g.nodes[u].op for u in g.users[x] if u >= n_forward]
    assert readers == ["fully_connected_grad_weight"]


def test_training_graph_adds_one_update_per_parameter():
    g, loss = mlp("float32")
    build_training_graph(g, loss, SGD(lr=0.1))
    updates = [n for n in g.nodes if n.op == "sgd_update"]
    assert len(updates) == 3 and len(g.state_pairs) == 6
    assert g.loss == loss
    assert all(g.tensors[m].kind == Kind.STATE for m in g.leaves(Kind.STATE))


def test_gradient_of_a_non_scalar_names_the_node():
    g = Graph()
    x = g.parameter("x", (3,))
    (y,) = g.apply("relu", [x], name="act")
    with pytest.raises(GraphError, match=r"cannot take the gradient of 'act' \(output of node 'act'\): "
                                         r"its shape is \(3,\), not a scalar"):
        gradients(g, y)


def test_unused_parameter_is_reported():
    g, loss = mlp()
    g.parameter("orphan", (2,))
    with pytest.raises(GraphError, match="parameter 'orphan' does not affect the loss"):
        gradients(g, loss)


def test_many_contributions_accumulate_in_place_in_the_same_order_bit_identically():
    from ops import registry
    from planner.allocation import simple_allocation
    from planner.budget import make_budget
    from planner.facts import GraphFacts
    from planner.swap_planner import plan
    from zoo import small

    g = small.lstm(batch=2, steps=10, features=4, hidden=4, layers=1, classes=3)
    chain = [n for n in g.nodes if n.name.startswith("lstm0/w_x.grad_")]
    assert [n.op for n in chain] == ["sum_n"] + ["accumulate"] * 8    # 10 step contributions to w_x
    assert len(chain[0].inputs) == 2
    for a, b in zip(chain, chain[1:]):
        assert b.inputs[0] == a.outputs[0] and g.users[a.outputs[0]] == [b.id]   # the sum's only reader
    # each accumulation writes over the running sum: one object however many steps
    facts = GraphFacts(g)
    budget = make_budget(facts, 1 << 30)
    program = plan(g, facts.order, simple_allocation(facts, budget), budget.scratch_bytes)
    objects = {ins.target: ins.objects for ins in program.instrs if ins.kind == 0}
    assert len({objects[n.id][-1] for n in chain}) == 1
    # a left-to-right chain adds in the same order as one n-ary node: the same bits
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal(7).astype(np.float32) for _ in range(10)]
    one, acc = np.empty(7, np.float32), np.empty(7, np.float32)
    registry.get("sum_n").compute({}, parts, [one])
    registry.get("sum_n").compute({}, parts[:2], [acc])
    for c in parts[2:]:
        registry.get("accumulate").compute({}, [acc, c], [acc])
    assert np.array_equal(one, acc)
