"""``capuchin``: Capuchin's (ASPLOS '20) per-tensor choice between swapping and recomputing, on
the graph's own order and the simple allocation, with no search.

Capuchin evicts by the tensors' measured access pattern and, for each tensor it evicts, swaps
it when the copy can hide behind compute and otherwise recomputes the tensors whose
recomputation frees the most memory per second of compute. Our reading on the swap pass
(``planner.swap_planner``): a full size class evicts the tensor next used furthest ahead (the
access pattern of one iteration is the next one's); one whose host copy is stale is dropped and
recomputed from a chain of at most four producers when that chain's seconds are below the copy
out and back on the busy link (the link's backlog included), and copied out otherwise. No
evicting ahead of need (Capuchin evicts when memory runs out), copy streams ordered by urgency.
"""
from __future__ import annotations

from ..allocation import simple_allocation
from ..policy import PlanRequest, Policy, register
from ..swap_planner import PlanOptions, plan

OPTIONS = PlanOptions(recompute=1.0, max_chain=4, order_copies=True)


def make(request: PlanRequest):
    facts, budget = request.facts, request.budget
    alloc = simple_allocation(facts, budget, request.profile, request.op_seconds)
    return plan(request.graph, facts.order, alloc, budget.scratch_bytes, request.profile, request.op_seconds,
                OPTIONS, policy=POLICY.name)


POLICY = register(Policy("capuchin", "Capuchin: each evicted tensor swapped or recomputed by cost, graph order, "
                         "no search", make, budget_ladder=True))
