"""Tests for planner/facts.py: what planning knows about a graph under an order, computed once."""
import numpy as np
import pytest

import planner.facts as facts_module
from allocator import aligned_bytes
from engine.ir import Graph
from engine.liveness import peak_bytes
from engine.schedules import random_order
from ops import registry as op_registry
from planner.allocation import minimal_allocation
from planner.facts import GraphFacts, OperatorScratch, operator_scratch, size_demand


def chain(n=3):
    g = Graph("chain")
    x = g.input("x", (256,))
    for i in range(n):
        (x,) = g.apply("relu", [x], name=f"r{i}")
    return g


def test_each_fact_is_computed_once(lstm_graph, monkeypatch):
    calls = {"demand": 0, "scratch": 0}
    real_demand, real_scratch = facts_module.size_demand, facts_module.operator_scratch

    def demand(*a):
        calls["demand"] += 1
        return real_demand(*a)

    def scratch(*a):
        calls["scratch"] += 1
        return real_scratch(*a)

    monkeypatch.setattr(facts_module, "size_demand", demand)
    monkeypatch.setattr(facts_module, "operator_scratch", scratch)
    f = GraphFacts(lstm_graph)
    assert calls == {"demand": 0, "scratch": 0}          # nothing until asked
    d = f.demand
    assert f.demand is d and f.minimal_allocation is f.minimal_allocation
    assert f.scratch is f.scratch and f.peak_bytes == f.peak_bytes
    f.smallest_budget, f.smallest_budget
    assert calls == {"demand": 1, "scratch": 1}
    GraphFacts(lstm_graph).demand                          # another GraphFacts computes its own
    assert calls["demand"] == 2


def test_facts_are_of_the_given_order(lstm_graph):
    g = lstm_graph
    default = GraphFacts(g)
    assert default.graph is g and default.order == g.default_order()
    order = random_order(g, np.random.default_rng(1))
    f = GraphFacts(g, np.array(order))
    assert f.order == list(order) and all(type(n) is int for n in f.order)
    expect = size_demand(g, order)
    for field in ("sizes", "size_index", "peak", "minimum", "per_node"):
        assert np.array_equal(getattr(f.demand, field), getattr(expect, field)), field
    assert f.peak_bytes == peak_bytes(g, order)
    assert default.peak_bytes == peak_bytes(g)
    assert f.minimal_allocation.to_dict() == minimal_allocation(expect).to_dict()


def test_smallest_budget_is_the_minimal_allocation_plus_operator_scratch(lstm_graph):
    f = GraphFacts(lstm_graph)
    assert f.scratch.bytes > 0
    assert f.smallest_budget == f.minimal_allocation.pool_bytes + f.scratch.bytes
    d = f.demand
    assert f.minimal_allocation.pool_bytes <= int((aligned_bytes(d.sizes) * d.minimum).sum())


def test_operator_scratch_is_the_largest_workspace_aligned(lstm_graph):
    g = lstm_graph
    need = [op_registry.get(n.op).workspace(n.attrs, [g.tensors[t] for t in n.inputs],
                                            [g.tensors[t] for t in n.outputs]) for n in g.nodes]
    s = operator_scratch(g)
    assert isinstance(s, OperatorScratch)
    assert s.node == int(np.argmax(need)) and s.bytes == int(aligned_bytes(max(need))) >= max(need)
    assert GraphFacts(g).scratch == s


def test_a_graph_without_workspaces_needs_no_scratch():
    f = GraphFacts(chain())
    assert f.scratch == OperatorScratch(0, -1)
    assert f.smallest_budget == f.minimal_allocation.pool_bytes


def test_demand_of_a_chain():
    """x -> r0 -> r1 -> r2, all 1 KiB: each relu touches two tensors, and at most two live at once."""
    f = GraphFacts(chain())
    d = f.demand
    assert d.sizes.tolist() == [1024] and d.size_index.tolist() == [0, 0, 0, 0]
    assert d.minimum.tolist() == [2] and d.peak.tolist() == [2]
    assert d.per_node.tolist() == [[2], [2], [2]]
    assert d.heaviest_node == 0 and d.heaviest_bytes == 2048
    assert not hasattr(d, "scratch") and not hasattr(d, "pool_budget")
    assert f.minimal_allocation.cnt.tolist() == [2]
    assert f.smallest_budget == 2 * 1024


def test_an_in_place_update_needs_no_object_of_its_own(lstm_graph):
    g = lstm_graph
    d = GraphFacts(g).demand
    updates = [n for n in g.nodes if op_registry.get(n.op).inplace]
    assert updates
    for n in updates:
        distinct = dict.fromkeys(n.inputs + n.outputs)
        assert d.per_node[n.id].sum() < len(distinct)


@pytest.mark.parametrize("n", [1, 4])
def test_order_defaults_to_insertion_order(n):
    g = chain(n)
    assert GraphFacts(g).order == list(range(n))
