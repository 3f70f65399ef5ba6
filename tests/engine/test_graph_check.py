import pytest

from engine.graph_check import NOT_EVERY_NODE_ONCE, check_order, misordered, validate
from engine.graph_io import graph_from_dict, graph_to_dict
from engine.ir import Graph, GraphError

from .test_ir import small_graph


def test_cycle_is_rejected_naming_a_node_on_it():
    g, *_ = small_graph()
    d = graph_to_dict(g)
    # make 'mul' read the output of 'add' instead of the parameter: mul -> relu -> add -> mul
    d["nodes"][0]["inputs"] = [0, d["nodes"][2]["outputs"][0]]
    with pytest.raises(GraphError, match=r"node '(mul|relu|add)' \(\w+\) is on a cycle"):
        graph_from_dict(d)


def test_inconsistent_declared_shape_is_rejected():
    g, *_ = small_graph()
    d = graph_to_dict(g)
    d["tensors"][d["nodes"][1]["outputs"][0]]["shape"] = [4, 4]
    with pytest.raises(GraphError, match=r"node 'relu' \(relu\): output 'relu' is declared \(4, 4\)"):
        graph_from_dict(d)


def test_tensor_with_two_producers_is_rejected():
    g, *_ = small_graph()
    d = graph_to_dict(g)
    d["nodes"][1]["outputs"] = d["nodes"][0]["outputs"]
    with pytest.raises(GraphError, match="also produced by"):
        graph_from_dict(d)


def test_check_order():
    g, *_ = small_graph()
    check_order(g, [0, 1, 2])
    with pytest.raises(GraphError, match="before its input's producer 'relu'"):
        check_order(g, [0, 2, 1])
    with pytest.raises(GraphError, match="exactly once"):
        check_order(g, [0, 1])


def test_validate_checks_arity_as_apply_does():
    g, *_ = small_graph()
    g.nodes[1].inputs = g.nodes[1].inputs * 2          # relu given two inputs
    with pytest.raises(GraphError, match=r"node 'relu' \(relu\): takes 1 inputs, got 2"):
        validate(g)
    h = Graph()
    x = h.input("x", (2,))
    h.apply("sum_n", [x, x], name="s")
    h.nodes[0].inputs = ()
    with pytest.raises(GraphError, match=r"node 's' \(sum_n\): takes at least one input, got none"):
        validate(h)


def test_misordered_names_the_first_fault():
    preds = [[], [0], [1, 0]].__getitem__
    assert misordered([0, 1, 2], 3, preds) is None
    assert misordered([2, 0, 1], 3, preds) == (2, 1)
    assert misordered([0, 0, 1], 3, preds) == NOT_EVERY_NODE_ONCE
    assert misordered([0, 1], 3, preds) == NOT_EVERY_NODE_ONCE
