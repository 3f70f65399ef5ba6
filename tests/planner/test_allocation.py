import numpy as np
import pytest

from allocator import aligned_bytes
from engine.ir import Graph
from engine.program import SWAP_OUT
from planner.allocation import minimal_allocation, simple_allocation, unlimited_allocation, working_set
from planner.budget import Budget, make_budget
from planner.facts import GraphFacts
from planner.swap_planner import plan
from planner.verify import verify


def test_demand_counts(lstm_graph):
    g = lstm_graph
    d = GraphFacts(g).demand
    assert np.array_equal(d.sizes, np.unique([t.nbytes for t in g.tensors]))
    assert (d.peak >= d.minimum).all() and (d.minimum >= 0).all()
    heavy = g.nodes[d.heaviest_node]
    assert d.heaviest_bytes == sum(g.tensors[t].nbytes for t in dict.fromkeys(heavy.inputs + heavy.outputs))


def test_simple_allocation_fits_and_holds_every_operator(lstm_graph):
    g = lstm_graph
    facts = GraphFacts(g)
    d = facts.demand
    for device in (facts.smallest_budget, 2 * facts.smallest_budget):
        budget = make_budget(facts, device)
        a = simple_allocation(facts, budget)
        assert a.pool_bytes <= budget.pool_bytes == device - facts.scratch.bytes
        per_class = np.zeros((d.per_node.shape[0], a.num_classes), dtype=np.int64)
        np.add.at(per_class.T, a.cls, d.per_node.T)     # objects of each class each node needs
        assert (a.cnt >= per_class.max(axis=0)).all()
    u = unlimited_allocation(facts)
    assert (u.cnt == np.maximum(d.peak, 1)).all()
    # a pool that holds every size's peak: nothing the iteration computes is ever copied out
    budget = Budget(u.pool_bytes + facts.scratch.bytes, facts.scratch.bytes)
    a = simple_allocation(facts, budget)
    assert a.pool_bytes <= budget.pool_bytes
    p = plan(g, facts.order, a, budget.scratch_bytes)
    verify(p, g, budget.device_bytes)
    computed = {t for n in g.nodes for t in n.outputs} - {nxt for _, nxt in g.state_pairs}
    assert not [i for i in p.instrs if i.kind == SWAP_OUT and i.copy and i.target in computed]


def test_the_working_set_holds_leaves_only_where_they_are_read():
    """A parameter read at the first and last step is in the working set only there (no
    profile: reads in consecutive steps keep it); activations from their write to last use."""
    g = Graph("ws")
    x = g.input("x", (256,))
    w = g.parameter("w", (256,))
    (a,) = g.apply("mul", [x, w], name="a")
    (b,) = g.apply("relu", [a], name="b")
    (c,) = g.apply("tanh", [b], name="c")
    g.apply("mul", [c, w], name="d")
    facts = GraphFacts(g)
    live = working_set(facts)            # one size: every tensor is 1 KiB
    assert live.shape == (1, 4)
    # step 0: x, w, a; step 1: a, b; step 2: b, c; step 3: c, w, d
    assert live[0].tolist() == [3, 2, 2, 3]


def test_simple_allocation_below_the_per_size_minima_groups_sizes(lstm_graph):
    """A pool too small for one class per size falls back to the minimal allocation's classes."""
    facts = GraphFacts(lstm_graph)
    d, m = facts.demand, facts.minimal_allocation
    assert m.pool_bytes < int((aligned_bytes(d.sizes) * d.minimum).sum())
    a = simple_allocation(facts, make_budget(facts, facts.smallest_budget))
    assert a.cls.tolist() == m.cls.tolist() and (a.cnt >= m.cnt).all()
    assert a.pool_bytes <= facts.smallest_budget - facts.scratch.bytes


def test_the_minimal_allocation_is_below_one_class_per_size(lstm_graph):
    facts = GraphFacts(lstm_graph)
    d = facts.demand
    assert facts.smallest_budget <= int((aligned_bytes(d.sizes) * d.minimum).sum()) + facts.scratch.bytes


def test_minimal_allocation_is_the_cheapest_valid_grouping(lstm_graph):
    """Brute force over every monotone CLS (2^(S-1) of them) agrees with the dynamic program."""
    import itertools
    from allocator import Allocation
    g = lstm_graph
    facts = GraphFacts(g)
    d = facts.demand
    s = len(d.sizes)
    assert s <= 12
    best = None
    for steps in itertools.product((0, 1), repeat=s - 1):
        cls = np.concatenate([[0], np.cumsum(steps)])
        cnt = np.array([max(1, int(d.per_node[:, cls == k].sum(axis=1).max())) for k in range(cls[-1] + 1)])
        b = Allocation(d.sizes, cls, cnt).pool_bytes
        best = b if best is None else min(best, b)
    m = minimal_allocation(d)
    assert m.pool_bytes == best == facts.smallest_budget - facts.scratch.bytes
    assert m.to_dict() == facts.minimal_allocation.to_dict()
    # and the planner really runs at that budget, with the operator scratch after the objects
    from planner.swap_planner import plan
    from planner.verify import VerificationError, verify
    scratch = facts.scratch.bytes
    program = plan(g, g.default_order(), m, scratch)
    assert scratch > 0 and program.arena.scratch_bytes == scratch
    assert program.arena.scratch_offset == m.pool_bytes
    verify(program, g, facts.smallest_budget)
    with pytest.raises(VerificationError, match="over the budget"):
        verify(program, g, facts.smallest_budget - 1)
