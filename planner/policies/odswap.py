"""``odswap``: on-demand swapping, the paper's Section 6.1 baseline.

The default topological order, least-recently-used eviction when a size class is full,
and prefetching learned from the first iteration (a swap-in starts as soon as its object
is released, not when the compute stream reaches it; the paper ignores ODSwap's first
iteration, and so do we by planning the steady state directly)."""
from __future__ import annotations

from ..allocation import simple_allocation
from ..policy import PlanRequest, Policy, register
from ..swap_planner import PlanOptions, plan


# LRU eviction, and every tensor, output or swap-in, into the free object freed earliest: the
# baseline does not get SwapAdvisor's reuse rule for outputs.
OPTIONS = PlanOptions(victim="lru", newest_for_outputs=False)


def make(request: PlanRequest):
    facts, budget = request.facts, request.budget
    alloc = simple_allocation(facts, budget, request.profile, request.op_seconds)
    return plan(request.graph, facts.order, alloc, budget.scratch_bytes, options=OPTIONS, policy=POLICY.name)


POLICY = register(Policy("odswap", "on-demand swapping: LRU eviction, prefetch learned from iteration 1", make))
