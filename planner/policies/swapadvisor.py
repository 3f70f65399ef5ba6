"""``swapadvisor``: the SwapAdvisor planner (Belady eviction with a recency threshold) on a
schedule and allocation found by the genetic search, or, without a search, on the default
order with the simple allocation."""
from __future__ import annotations

from ..allocation import simple_allocation
from ..policy import PlanRequest, Policy, register
from ..swap_planner import plan


def make(request: PlanRequest):
    facts, budget = request.facts, request.budget
    order = facts.order if request.schedule is None else list(request.schedule)
    alloc = request.allocation if request.allocation is not None else simple_allocation(facts, budget)
    return plan(request.graph, order, alloc, budget.scratch_bytes, request.op_seconds, request.link_bytes_per_s,
                policy=POLICY.name)


POLICY = register(Policy("swapadvisor", "SwapAdvisor: Belady swapping on a searched schedule and allocation",
                         make, searches=True))
