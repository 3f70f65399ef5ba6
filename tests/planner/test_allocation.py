import numpy as np
import pytest

from allocator import aligned_bytes
from engine.ir import Graph
from engine.program import SWAP_OUT
from allocator import Allocation
from planner.allocation import (_one_more_for_the_largest, minimal_allocation, simple_allocation,
                                 unlimited_allocation, working_set)
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



def small_and_wide(n=8):
    """n wide activations (1 MiB) and n small ones (1 KiB, from biases), all read at the end,
    one pair at a time: every size's peak is n + 1, one operator needs 3."""
    g = Graph("small-and-wide")
    h = g.input("x", (64, 4096))
    wide, small = [], []
    for i in range(n):
        b = g.parameter(f"b{i}", (256,))
        (h,) = g.apply("relu", [h], name=f"r{i}")
        (c,) = g.apply("sum_n", [b, b], name=f"c{i}")
        wide.append(h)
        small.append(c)
    for xs, name in ((wide, "w"), (small, "s")):
        acc = xs[-1]
        for j, t in enumerate(reversed(xs[:-1])):
            (acc,) = g.apply("add", [acc, t], name=f"{name}{j}")
    return g


def test_the_smallest_sizes_get_their_peaks():
    """With room for five of the nine wide activations, the uniform fraction would give the
    1 KiB class 8 of its 17; it gets all 17 (17 KiB), and the wide class 4."""
    g = small_and_wide()
    facts = GraphFacts(g)
    d = facts.demand
    assert d.sizes.tolist() == [1024, 2**20] and d.peak.tolist() == [17, 9]
    budget = Budget(5 * 2**20 + 8 * 1024 + facts.scratch.bytes, facts.scratch.bytes)
    a = simple_allocation(facts, budget)
    assert a.cls.tolist() == [0, 1] and a.cnt.tolist() == [17, 4]
    assert a.pool_bytes <= budget.pool_bytes
    verify(plan(g, facts.order, a, budget.scratch_bytes), g, budget.device_bytes)


def test_the_largest_class_takes_one_object_from_the_class_with_most_to_spare():
    sizes = np.array([1024, 2**20, 4 * 2**20])
    need = np.array([[3, 3, 3], [0, 3, 3], [0, 0, 2]])      # [i, j]: a class of sizes i..j
    peak = np.array([[40, 40, 40], [0, 9, 9], [0, 0, 6]])
    runs = [(0, 1), (1, 2), (2, 3)]
    alloc = Allocation(sizes, np.array([0, 1, 2]), np.array([40, 9, 3]))
    # The 1 KiB class has the most objects above its need (37) but cannot pay 4 MiB; the 1 MiB
    # class (6 above) pays with 4 objects.
    assert _one_more_for_the_largest(alloc, need, peak, runs).cnt.tolist() == [40, 5, 4]
    # At its peak the largest class takes nothing; nor when no class can pay.
    assert _one_more_for_the_largest(alloc.with_counts(np.array([40, 9, 6])), need, peak, runs).cnt.tolist() == [40, 9, 6]
    assert _one_more_for_the_largest(alloc.with_counts(np.array([40, 5, 3])), need, peak, runs).cnt.tolist() == [40, 5, 3]


def test_tensors_whose_copies_are_mostly_latency_stay_resident(monkeypatch):
    """ResNet-50 inference at 0.2 of its peak: its weights under latency x rate (120 KB on the
    V100 link; batch-norm parameters of at most 8 KiB most of them) once took ~200 swap-ins a
    batch, each mostly the link's 10 us latency, since the 1% of the pool the smallest sizes were
    given held few of them; up to LATENCY_SHARE of the pool they now get every object, and the
    batch is faster."""
    import planner.allocation as allocation
    from engine.profile import analytic_profile
    from engine.program import SWAP_IN
    from planner.policy import plan_with
    from planner.simulate import simulate
    from zoo.resnet import resnet

    v100 = analytic_profile("v100")
    latency_bytes = v100.link.latency_s * v100.link.h2d_bytes_per_s
    g = resnet(blocks=(3, 4, 6, 3), batch=1, size=64, classes=1000, base_width=64)
    facts = GraphFacts(g)
    device = int(0.2 * facts.peak_bytes)

    def small_swap_ins_and_seconds():
        program = plan_with("swapadvisor", g, device, v100, facts=facts)
        verify(program, g, device)
        small = sum(1 for i in program.instrs
                    if i.kind == SWAP_IN and i.copy and g.tensors[i.target].nbytes <= latency_bytes)
        return small, simulate(program, g, v100).total

    small, seconds = small_swap_ins_and_seconds()
    monkeypatch.setattr(allocation, "LATENCY_SHARE", 0.0)
    small_before, seconds_before = small_swap_ins_and_seconds()
    assert small_before > 150 and small < 20
    assert seconds < 0.9 * seconds_before
