import numpy as np
import pytest

from allocator import aligned_bytes
from planner.allocation import (check_budget, simple_allocation, size_demand, smallest_budget,
                                unlimited_allocation)
from planner.swap_planner import PlanError


def test_demand_counts(lstm_graph):
    g = lstm_graph
    d = size_demand(g, g.default_order())
    assert np.array_equal(d.sizes, np.unique([t.nbytes for t in g.tensors]))
    assert (d.peak >= d.minimum).all() and (d.minimum >= 0).all()
    heavy = g.nodes[d.heaviest_node]
    assert d.heaviest_bytes == sum(g.tensors[t].nbytes for t in dict.fromkeys(heavy.inputs + heavy.outputs))


def test_simple_allocation_fits_and_holds_every_operator(lstm_graph):
    g = lstm_graph
    order = g.default_order()
    d = size_demand(g, order)
    for budget in (smallest_budget(d), 2 * smallest_budget(d)):
        a = simple_allocation(g, order, budget)
        assert a.pool_bytes <= budget - d.scratch
        per_class = np.zeros((d.per_node.shape[0], a.num_classes), dtype=np.int64)
        np.add.at(per_class.T, a.cls, d.per_node.T)     # objects of each class each node needs
        assert (a.cnt >= per_class.max(axis=0)).all()
    u = unlimited_allocation(g, order)
    assert (u.cnt == np.maximum(d.peak, 1)).all()


def test_too_small_a_budget_names_the_operator_and_the_smallest_budget(lstm_graph):
    g = lstm_graph
    d = size_demand(g, g.default_order())
    with pytest.raises(PlanError, match=r"cannot run .* \(.*; its inputs and outputs alone need .*\); "
                                        r"the smallest budget that runs this model is"):
        check_budget(g, d, smallest_budget(d) - 1)
    assert smallest_budget(d) <= int((aligned_bytes(d.sizes) * d.minimum).sum())


def test_minimal_allocation_is_the_cheapest_valid_grouping(lstm_graph):
    """Brute force over every monotone CLS (2^(S-1) of them) agrees with the dynamic program."""
    import itertools
    from allocator import Allocation
    from planner.allocation import minimal_allocation
    g = lstm_graph
    d = size_demand(g, g.default_order())
    s = len(d.sizes)
    assert s <= 12
    best = None
    for steps in itertools.product((0, 1), repeat=s - 1):
        cls = np.concatenate([[0], np.cumsum(steps)])
        cnt = np.array([max(1, int(d.per_node[:, cls == k].sum(axis=1).max())) for k in range(cls[-1] + 1)])
        b = Allocation(d.sizes, cls, cnt).pool_bytes
        best = b if best is None else min(best, b)
    m = minimal_allocation(d)
    assert m.pool_bytes == best == smallest_budget(d) - d.scratch
    # and the planner really runs at that budget, with the operator scratch after the objects
    from planner.swap_planner import plan
    from planner.verify import VerificationError, verify
    program = plan(g, g.default_order(), m)
    assert d.scratch > 0 and program.pool.scratch_bytes == d.scratch
    verify(program, g, smallest_budget(d))
    with pytest.raises(VerificationError, match="over the budget"):
        verify(program, g, smallest_budget(d) - 1)
