"""``swapadvisor``: the SwapAdvisor planner (Belady eviction with a recency threshold) on a
schedule and allocation found by the genetic search, or, without a search, on the default
order with the simple allocation."""
from __future__ import annotations

from ..allocation import simple_allocation
from ..policy import PlanRequest, Policy, register
from ..swap_planner import PlanOptions, plan

# Evict ahead to keep a quarter of each class free, and order the copy streams by urgency
# (measured on the Table 1 models: bench/results/plan_quality_*.txt).
OPTIONS = PlanOptions(headroom=0.25, order_copies=True)


def make(request: PlanRequest):
    facts, budget = request.facts, request.budget
    order = facts.order if request.schedule is None else list(request.schedule)
    alloc = request.allocation
    if alloc is None:
        alloc = simple_allocation(facts, budget, request.profile, request.node_seconds)
    return plan(request.graph, order, alloc, budget.scratch_bytes, request.profile, request.node_seconds,
                OPTIONS, policy=POLICY.name)


POLICY = register(Policy("swapadvisor", "SwapAdvisor: Belady swapping on a searched schedule and allocation",
                         make, searches=True))
