"""Tests for planner/policy.py and planner/policies/: the registry and each registered policy."""
import numpy as np
import pytest

from engine.errors import EngineError
from engine.profile import analytic_profile
from engine.program import SWAP_IN, SWAP_OUT
from engine.schedules import random_order
from planner import policy
from planner.allocation import simple_allocation
from planner.budget import make_budget
from planner.errors import PlanError
from planner.facts import GraphFacts
from planner.simulate import simulate
from planner.verify import verify


def test_every_policy_gives_a_verified_program(lstm_graph):
    g = lstm_graph
    facts = GraphFacts(g)
    budget = make_budget(facts, facts.smallest_budget)
    prof = analytic_profile("v100")
    secs = prof.node_seconds(g)
    times = {}
    for name in ("ideal", "odswap", "swapadvisor"):
        pol = policy.get(name)
        p = pol.make(policy.PlanRequest(g, facts, None if name == "ideal" else budget, prof, secs))
        assert p.policy == name
        verify(p, g, None if name == "ideal" else budget.device_bytes)
        times[name] = simulate(p, g, prof, secs).total
    assert policy.unlimited_program(g).count(SWAP_OUT) == 0
    assert times["ideal"] <= min(times["odswap"], times["swapadvisor"])


def test_plan_with_is_one_call_from_a_name_to_a_program(lstm_graph):
    g = lstm_graph
    facts = GraphFacts(g)
    prof = analytic_profile("v100")
    device = facts.smallest_budget
    for name in ("odswap", "swapadvisor"):
        p = policy.plan_with(name, g, device, prof)
        verify(p, g, device)
        assert p.count(SWAP_OUT) > 0 and p.arena.arena_bytes <= device
        # the same program as the record's make on the same request
        q = policy.get(name).make(policy.PlanRequest(g, facts, make_budget(facts, device), prof))
        assert p.to_dict() == q.to_dict()
    ideal = policy.plan_with("ideal", g)
    assert ideal.to_dict() == policy.unlimited_program(g, facts).to_dict()
    assert ideal.to_dict() == policy.plan_with("ideal", g, 1).to_dict()     # ideal ignores any budget
    assert policy.plan_with("reference", g) is None


def test_plan_with_refuses_a_missing_or_too_small_budget(lstm_graph):
    g = lstm_graph
    with pytest.raises(ValueError, match="policy 'odswap' needs a device budget in bytes"):
        policy.plan_with("odswap", g)
    smallest = GraphFacts(g).smallest_budget
    with pytest.raises(PlanError, match="the smallest budget that runs this model is"):
        policy.plan_with("swapadvisor", g, smallest - 1)


def test_swapadvisor_plans_the_given_schedule_and_allocation(lstm_graph):
    g = lstm_graph
    facts = GraphFacts(g)
    budget = make_budget(facts, 2 * facts.smallest_budget)
    order = random_order(g, np.random.default_rng(3))
    assert order != facts.order
    alloc = simple_allocation(GraphFacts(g, order), budget)
    p = policy.get("swapadvisor").make(policy.PlanRequest(g, facts, budget, schedule=order, allocation=alloc))
    assert p.schedule == list(order)
    assert p.arena.allocator == {"name": "size_classes", **alloc.to_dict()}
    verify(p, g, budget.device_bytes)
    # without them: the default order and the simple allocation
    q = policy.get("swapadvisor").make(policy.PlanRequest(g, facts, budget))
    assert q.schedule == facts.order
    assert q.arena.allocator == {"name": "size_classes", **simple_allocation(facts, budget).to_dict()}


def test_odswap_evicts_least_recently_used_and_swapadvisor_by_belady(lstm_graph):
    """The two swapping policies differ only in the planner's victim choice here."""
    g = lstm_graph
    device = GraphFacts(g).smallest_budget
    od, sa = policy.plan_with("odswap", g, device), policy.plan_with("swapadvisor", g, device)
    assert od.schedule == sa.schedule == g.default_order()
    evicted = lambda p: [(i.kind, i.target) for i in p.instrs if i.kind in (SWAP_IN, SWAP_OUT)]  # noqa: E731
    assert evicted(od) != evicted(sa)


def test_registry_records_and_lookups():
    assert set(policy.DEFAULT_NAMES) <= set(policy.names())
    assert "reference" in policy.names()
    assert policy.get("IDEAL") is policy.get("ideal")           # names are case-insensitive
    assert policy.searched() is policy.get("swapadvisor") and policy.get("swapadvisor").searches
    assert policy.unlimited() is policy.get("ideal") and not policy.get("ideal").needs_budget
    ref = policy.get("reference")
    assert not ref.runs_program and not ref.needs_budget and not ref.searches
    assert policy.get("odswap").needs_budget and not policy.get("odswap").searches
    for name in policy.names():
        p = policy.get(name)
        assert p.summary and "\n" not in p.summary


def test_unknown_policy_lists_the_known_ones():
    with pytest.raises(policy.UnknownPolicy, match=r"unknown policy 'magic' \(choose from ideal, odswap, "
                                                   r"swapadvisor, reference"):
        policy.get("magic")
    assert issubclass(policy.UnknownPolicy, ValueError) and issubclass(policy.UnknownPolicy, EngineError)
    with pytest.raises(ValueError, match="unknown policy 'magic'"):
        policy.plan_with("magic", None)


def test_a_registered_policy_is_found_and_can_be_removed(lstm_graph):
    calls = []

    def make(request):
        calls.append(request)
        return policy.unlimited_program(request.graph, request.facts)

    mine = policy.register(policy.Policy("Mine", "a test policy", make, needs_budget=False))
    try:
        assert policy.get("mine") is mine and "mine" in policy.names()
        p = policy.plan_with("mine", lstm_graph)
        assert len(calls) == 1 and calls[0].graph is lstm_graph and calls[0].budget is None
        assert p.count(SWAP_OUT) == 0
    finally:
        policy.unregister("MINE")
    assert "mine" not in policy.names()
    with pytest.raises(policy.UnknownPolicy):
        policy.get("mine")


def test_plan_request_reads_op_times_from_the_profile(lstm_graph):
    g = lstm_graph
    prof = analytic_profile("v100")
    facts = GraphFacts(g)
    r = policy.PlanRequest(g, facts, profile=prof)
    assert np.array_equal(r.op_seconds, prof.node_seconds(g))
    assert r.link_bytes_per_s == prof.link.h2d_bytes_per_s
    secs = np.ones(len(g.nodes))
    assert policy.PlanRequest(g, facts, profile=prof, node_seconds=secs).op_seconds is secs
    bare = policy.PlanRequest(g, facts)
    assert bare.op_seconds is None and bare.link_bytes_per_s is None
