import numpy as np
import pytest

from engine.graph_check import check_order
from engine.schedules import priority_order, random_order, write_after_read_edges
from zoo import small


def test_random_orders_are_topological_and_differ():
    g = small.lstm(batch=2, steps=3, features=4, hidden=4, layers=2, classes=3)
    orders = [random_order(g, np.random.default_rng(s)) for s in range(3)]
    edges = write_after_read_edges(g)
    assert edges                      # SGD updates and gradient accumulations write over inputs
    for o in orders:
        check_order(g, o)
        pos = {n: i for i, n in enumerate(o)}
        assert all(pos[reader] < pos[update] for reader, update in edges)
    assert len({tuple(o) for o in orders}) == 3


def test_priority_order_follows_priorities_where_it_can():
    g = small.lstm(batch=2, steps=3, features=4, hidden=4, layers=2, classes=3)
    assert priority_order(g, list(range(len(g.nodes)))) == g.default_order()
    rev = priority_order(g, [-n for n in range(len(g.nodes))])
    check_order(g, rev)
    assert rev != g.default_order()


def _lstm():
    return small.lstm(batch=2, steps=3, features=4, hidden=4, layers=2, classes=3)


def _accumulating_gpt():
    import zoo
    from engine import iteration_stream as st
    from engine.autodiff import make_optimizer
    return st.IterationGraphs(lambda seq: zoo.build("gpt-tiny", size=seq, positions=8), make_optimizer("sgd"),
                              2).micro(8)


@pytest.mark.parametrize("make, kinds", [(_lstm, "parameters"), (_accumulating_gpt, "persistent")])
def test_updates_when_ready_runs_each_update_as_soon_as_it_can(make, kinds):
    # The LSTM's SGD updates; a micro-step's gradient accumulators (state, not parameters), as an
    # eager framework accumulates into .grad during the backward pass.
    from engine.ir import PERSISTENT_KINDS, Kind
    from engine.schedules import schedule_successors, updates_when_ready
    g = make()
    chosen = (Kind.PARAMETER,) if kinds == "parameters" else PERSISTENT_KINDS
    order = updates_when_ready(g, chosen)
    check_order(g, order)
    updates = {g.producer[nxt] for cur, nxt in g.state_pairs if g.tensors[cur].kind in chosen and g.producer[nxt] >= 0}
    assert updates
    pos = {n: i for i, n in enumerate(order)}
    preds = {n: [] for n in range(len(g.nodes))}
    for u, succ in enumerate(schedule_successors(g)):
        for v in succ:
            preds[v].append(u)
    for u in updates:
        ready = max(pos[p] for p in preds[u])
        # only other updates may run between the moment it became ready and itself
        assert all(order[i] in updates for i in range(ready + 1, pos[u])), g.nodes[u].name
    default = {n: i for i, n in enumerate(g.default_order())}
    assert sum(pos[u] for u in updates) < sum(default[u] for u in updates)


def _war_cycle():
    """a = tanh(x); s = accumulate(a, y) (may be written over a); c = a + s: c reads a and needs
    s, so a never dies at s and the write is never taken (issue 43)."""
    from tests.planner.test_smallest_budget import war_cycle_graph
    return war_cycle_graph()


def test_a_write_no_order_can_take_imposes_no_edge():
    # Before: the edge c -> s closed a cycle with s -> c, and every schedule (smartswap's eager
    # order, the search's seeds, random orders) raised GraphError on a graph that runs.
    from engine.ir import PERSISTENT_KINDS
    from engine.liveness import lifetimes
    from engine.schedules import updates_when_ready
    g = _war_cycle()
    assert write_after_read_edges(g) == []
    assert updates_when_ready(g, PERSISTENT_KINDS) == g.default_order() == [0, 1, 2]
    check_order(g, random_order(g, np.random.default_rng(0)))
    assert lifetimes(g, g.default_order()).inplace_of[g.nodes[1].outputs[0]] == -1


def test_writes_whose_edges_would_cycle_together_keep_the_first_ones():
    # u1 over p1 and u2 over q1; r1 reads p1 and needs u2, r2 reads q1 and needs u1: either write
    # alone can be taken (r1 before u1, or r2 before u2), not both. The first in node order keeps
    # its edge, and every schedule takes it.
    from engine.ir import Graph
    from engine.liveness import lifetimes
    g = Graph("war-cross")
    x, y = g.input("x", (64,)), g.input("y", (64,))
    p1, = g.apply("tanh", [x], name="p1")
    q1, = g.apply("tanh", [y], name="q1")
    u1, = g.apply("accumulate", [p1, y], name="u1")
    u2, = g.apply("accumulate", [q1, x], name="u2")
    g.apply("add", [p1, u2], name="r1")
    g.apply("add", [q1, u1], name="r2")
    assert write_after_read_edges(g) == [(4, 2)]            # r1 before u1
    for seed in range(5):
        order = random_order(g, np.random.default_rng(seed))
        check_order(g, order)
        assert lifetimes(g, order).inplace_of[u1] == p1


def test_writes_never_taken_impose_no_edges():
    # accumulate(x, x) reads x twice; a write over an output (kept to the end) is never taken.
    from engine.ir import Graph
    g = Graph("never-taken")
    x, z = g.input("x", (64,)), g.input("z", (64,))
    g.apply("tanh", [x], name="rx")
    g.apply("accumulate", [x, x], name="dbl")
    a, = g.apply("tanh", [z], name="a")
    g.apply("relu", [a], name="ra")
    g.apply("accumulate", [a, z], name="acc")
    g.mark_output(a)
    assert write_after_read_edges(g) == []
