"""``ideal``: no memory limit. Every tensor gets its own object for as long as it lives and
all state stays resident: the upper bound on throughput that reports compare with."""
from __future__ import annotations

from ..allocation import unlimited_allocation
from ..policy import PlanRequest, Policy, register
from ..swap_planner import plan


def make(request: PlanRequest):
    facts = request.facts
    return plan(request.graph, facts.order, unlimited_allocation(facts), facts.scratch.bytes, policy=POLICY.name)


POLICY = register(Policy("ideal", "unlimited memory: nothing is swapped (the upper bound)", make,
                         needs_budget=False, unlimited=True))
