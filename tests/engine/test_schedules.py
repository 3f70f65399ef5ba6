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
