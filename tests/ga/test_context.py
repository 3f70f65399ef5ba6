import numpy as np
import pytest

from allocator import Allocation
from engine.ir import Graph
from engine.schedules import write_after_read_edges
from ga.context import GraphContext
from ops import registry as op_registry
from planner.allocation import minimal_allocation
from planner.errors import PlanError
from planner.facts import GraphFacts
from planner.swap_planner import plan

from .helpers import lstm, lstm_context


def test_successors_hold_the_graph_edges_plus_write_after_read_edges():
    g, ctx = lstm(), lstm_context()
    for v in range(len(g.nodes)):
        assert set(g.successors(v)) <= set(ctx.successors[v])
    extra = write_after_read_edges(g)
    assert extra, "an SGD-trained graph has updates with other readers"
    for reader, update in extra:
        assert update in ctx.successors[reader]
        assert op_registry.get(g.nodes[update].op).inplace
    assert sum(ctx.pred_count) == sum(len(s) for s in ctx.successors)
    assert ctx.sources == [v for v in range(len(g.nodes)) if ctx.pred_count[v] == 0]


def test_default_order_satisfies_every_edge():
    ctx = lstm_context()
    assert ctx.check_order(np.arange(ctx.num_nodes))
    assert not ctx.check_order(np.arange(ctx.num_nodes)[::-1])
    assert not ctx.check_order(np.arange(ctx.num_nodes - 1))


def test_class_minima_match_the_planner_demand():
    g, ctx = lstm(), lstm_context()
    facts = GraphFacts(g)
    d = facts.demand
    np.testing.assert_array_equal(ctx.sizes, d.sizes)
    np.testing.assert_array_equal(ctx.class_minima(np.arange(ctx.num_sizes)), np.maximum(d.minimum, 1))
    one_class = ctx.class_minima(np.zeros(ctx.num_sizes, dtype=int))
    assert one_class.tolist() == [int(np.asarray(d.per_node).sum(axis=1).max())]
    minimal = minimal_allocation(d)
    np.testing.assert_array_equal(ctx.minimal_cls, minimal.cls)
    np.testing.assert_array_equal(ctx.class_minima(minimal.cls), minimal.cnt)
    np.testing.assert_array_equal(ctx.minimal_cls, facts.minimal_allocation.cls)
    heavy = g.nodes[d.heaviest_node]
    assert (ctx.heaviest_node, ctx.heaviest_bytes) == (heavy.name, d.heaviest_bytes)


def test_from_facts_reads_the_facts_demand_and_equals_from_graph(monkeypatch):
    g = lstm()
    facts = GraphFacts(g)
    a = GraphContext.from_facts(facts)
    assert "demand" in vars(facts)                 # computed once, and kept on the facts
    import planner.facts as facts_module
    monkeypatch.setattr(facts_module, "size_demand", lambda *a: pytest.fail("demand recomputed"))
    b = GraphContext.from_facts(facts)
    c = lstm_context()
    for x in (b, c):
        assert (x.name, x.num_nodes, x.pred_count, x.successors, x.sources, x.heaviest_node, x.heaviest_bytes) == \
               (a.name, a.num_nodes, a.pred_count, a.successors, a.sources, a.heaviest_node, a.heaviest_bytes)
        for field in ("sizes", "slot_bytes", "size_minimum", "size_peak", "node_rows", "minimal_cls"):
            np.testing.assert_array_equal(getattr(x, field), getattr(a, field))


def test_class_minima_are_enough_for_random_schedules_and_one_less_is_not():
    """With the write-after-read edges, a CLS at its minima plans in every searched schedule."""
    from ga.schedule_ops import random_schedule

    g, ctx = lstm(), lstm_context()
    cls = ctx.minimal_cls
    alloc = Allocation(ctx.sizes, cls, ctx.class_minima(cls))
    rng = np.random.default_rng(0)
    for _ in range(5):
        plan(g, random_schedule(ctx, rng).tolist(), alloc, 0)
    short = alloc.cnt.copy()
    k = int(np.argmax(short))
    short[k] -= 1
    try:
        plan(g, g.default_order(), alloc.with_counts(short), 0)
    except PlanError:
        pass
    else:  # pragma: no cover - the minima would not be minimal
        raise AssertionError("one object fewer than the minimum still planned")


def test_class_peaks_and_slots_follow_the_runs():
    ctx = GraphContext.synthetic(sizes=[100, 300, 1000], peak=[2, 3, 5])
    assert ctx.class_peaks([0, 0, 1]).tolist() == [5, 5]
    assert ctx.class_slot_bytes([0, 0, 1]).tolist() == [512, 1024]
    assert ctx.class_minima([0, 1, 1]).tolist() == [1, 1]


def test_synthetic_context_counts_predecessors_once():
    ctx = GraphContext.synthetic(3, [(0, 2), (1, 2), (0, 2)])
    assert ctx.pred_count == [0, 0, 2] and ctx.sources == [0, 1]


def test_graph_without_state_updates_has_no_extra_edges():
    g = Graph("plain")
    x = g.input("x", (2, 2))
    (y,) = g.apply("relu", [x])
    g.apply("relu", [y])
    assert write_after_read_edges(g) == []
    assert GraphContext.from_graph(g).successors == [[1], []]
