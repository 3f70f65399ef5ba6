import numpy as np

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
