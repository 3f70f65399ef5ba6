import numpy as np
import pytest

from allocator import Allocation
from engine.ir import Graph, Kind
from engine.profile import Link, Profile
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT
from engine.schedules import random_order
from planner.allocation import simple_allocation, unlimited_allocation
from planner.budget import make_budget
from planner.errors import PlanError
from planner.facts import GraphFacts
from planner.simulate import simulate
from planner.swap_planner import PlanOptions, plan
from planner.verify import verify


def test_unlimited_allocation_never_evicts(lstm_graph):
    g = lstm_graph
    facts = GraphFacts(g)
    p = plan(g, g.default_order(), unlimited_allocation(facts), facts.scratch.bytes)
    verify(p, g)
    assert p.arena.scratch_bytes == facts.scratch.bytes
    assert p.count(SWAP_OUT) == 0
    swapped_in = {ins.target for ins in p.instrs if ins.kind == SWAP_IN}
    assert swapped_in == set(g.leaves(Kind.INPUT, Kind.LABEL))
    assert set(p.initial_resident) == {cur for cur, _ in g.state_pairs}


def test_tight_budget_swaps_and_keeps_the_double_pass_fixed_point(lstm_graph, tight_program):
    g = lstm_graph
    p, budget = tight_program
    verify(p, g, budget)          # includes: resident state ends in its home object
    assert p.count(SWAP_OUT) > 0 and p.arena.arena_bytes <= budget
    # a parameter that is not resident at the start has a current host copy: evicting it
    # before its update never copies it out
    params = set(g.leaves(Kind.PARAMETER)) - set(p.initial_resident)
    assert not [i for i in p.instrs if i.kind == SWAP_OUT and i.target in params]


@pytest.mark.parametrize("seed", range(4))
def test_random_schedules_and_budgets_give_verified_programs(lstm_graph, seed):
    g = lstm_graph
    rng = np.random.default_rng(seed)
    order = random_order(g, rng)
    facts = GraphFacts(g, order)
    budget = make_budget(facts, int(facts.smallest_budget * rng.uniform(1.0, 2.0)))
    for victim in ("belady", "lru"):
        p = plan(g, order, simple_allocation(facts, budget), budget.scratch_bytes, options=PlanOptions(victim=victim))
        assert p.schedule == order
        verify(p, g, budget.device_bytes)


def test_swap_in_waits_only_for_its_object_and_host_copy(tight_program):
    """Prefetch: a swap-in never depends on the compute that will read it, only on earlier work."""
    p, _ = tight_program
    for i, ins in enumerate(p.instrs):
        if ins.kind == SWAP_IN:
            assert all(d < i for d in ins.deps)
            assert all(p.instrs[d].kind != SWAP_IN for d in ins.deps)


def chain_graph(n=6):
    """x -> relu -> relu ... : every tensor 1 KiB."""
    g = Graph("chain")
    x = g.input("x", (256,))
    ts = [x]
    for i in range(n):
        (x,) = g.apply("relu", [x], name=f"r{i}")
        ts.append(x)
    return g, ts


def fan_graph():
    g = Graph("fan")
    x = g.input("x", (256,))
    (a,) = g.apply("relu", [x], name="a")
    (b,) = g.apply("tanh", [x], name="b")
    (c,) = g.apply("sigmoid", [x], name="c")      # needs room: a (read next) or b (read last)
    (ac,) = g.apply("add", [a, c], name="ac")
    g.apply("add", [ac, b], name="out")
    return g


@pytest.mark.parametrize("victim,expected", [("belady", "b"), ("lru", "a")])
def test_victim_policies(victim, expected):
    g = fan_graph()
    alloc = Allocation(np.array([1024]), np.array([0]), np.array([3]))
    p = plan(g, g.default_order(), alloc, 0, options=PlanOptions(victim=victim, threshold_s=0.0))
    verify(p, g)
    evicted = [g.tensors[i.target].name for i in p.instrs if i.kind == SWAP_OUT]
    assert evicted[0] == expected


def test_an_operator_that_cannot_fit_is_named():
    g, _ = chain_graph(2)
    alloc = Allocation(np.array([1024]), np.array([0]), np.array([1]))
    with pytest.raises(PlanError, match=r"operator 'r0' \(relu\) needs 2 objects of size class 0 at once; "
                                        r"the allocation has 1"):
        plan(g, g.default_order(), alloc, 0)


def test_the_arena_records_its_objects_scratch_and_allocator():
    g, _ = chain_graph(3)
    alloc = Allocation(np.array([1024]), np.array([0]), np.array([2]))
    p = plan(g, g.default_order(), alloc, 512)
    a = p.arena
    assert a.object_offset.tolist() == [0, 1024] and a.object_bytes.tolist() == [1024, 1024]
    assert (a.arena_bytes, a.scratch_bytes, a.scratch_offset) == (2048 + 512, 512, 2048)
    assert a.allocator == {"name": "size_classes", **alloc.to_dict()}
    verify(p, g, 2048 + 512)


def test_an_allocation_without_a_tensor_size_is_a_plan_error():
    g, _ = chain_graph(2)
    alloc = Allocation(np.array([512]), np.array([0]), np.array([4]))
    with pytest.raises(PlanError, match="the allocation has no size class for tensors of 1024 bytes"):
        plan(g, g.default_order(), alloc, 0)


def test_outputs_take_the_object_a_compute_freed_last_so_a_swap_in_can_start_early():
    """x -> r0 -> r1 -> r2 -> r3, then add(r3, y), four objects: x stays resident (its host copy
    is current) and the chain needs two objects at a time. Outputs reusing the object the last
    compute freed leave the fourth free from the start, so y's swap-in depends on nothing and
    runs during r0; taking the earliest freed object instead rotates the chain through all
    three, and y waits for a compute."""
    g, ts = chain_graph(4)
    w = g.input("y", (256,))
    g.apply("add", [ts[-1], w], name="out")
    alloc = Allocation(np.array([1024]), np.array([0]), np.array([4]))
    profile = Profile("slow", Link(h2d_bytes_per_s=512, d2h_bytes_per_s=512, duplex_bytes_per_s=1024,
                                   latency_s=0.0))
    secs = np.ones(len(g.nodes))
    times = {}
    for newest in (True, False):
        p = plan(g, g.default_order(), alloc, 0, profile, secs, PlanOptions(newest_for_outputs=newest))
        verify(p, g, 4 * 1024)
        w_in = next(ins for ins in p.instrs if ins.kind == SWAP_IN and ins.target == w)
        chain_objects = {ins.objects[-1] for ins in p.instrs if ins.kind == COMPUTE}
        assert (not w_in.deps) == newest
        assert (w_in.obj not in chain_objects) == newest
        times[newest] = simulate(p, g, profile, secs).total
    assert times == {True: 7.0, False: 8.0}     # x in (2), r0..r3 (4), out (1); y in after r2: +1
