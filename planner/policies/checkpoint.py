"""``checkpoint``: recomputation only, Chen et al.'s sqrt(n) segment checkpointing (2016), on
the graph's own order and the simple allocation; nothing is copied out.

The tensors a plan could drop (outputs of recomputable one-output nodes, not kept past the
iteration) are cut, along the order, into segments of about sqrt(n) of them; the last of each
segment is a checkpoint and never leaves the device. When a size class is full, the swap pass
(``planner.swap_planner`` with ``recompute_only``) drops the non-checkpoint tensor next used
furthest ahead and recomputes it at its next read from its segment (a chain of at most two
segments' nodes). Unlike the classic scheme it drops only what the budget needs, so with room
to spare it recomputes nothing. No activation is copied out: besides dropped tensors only those
whose host copy is current leave (a parameter before its update, the batch), read in again
when needed; a budget below what the checkpoints, the gradients and the next values of the
state hold at once does not plan.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..allocation import simple_allocation
from ..errors import OutOfRoom, PlanError
from ..policy import PlanRequest, Policy, register
from ..swap_planner import GraphArrays, PlanOptions, plan

OPTIONS = PlanOptions(recompute_only=True, order_copies=True)


def checkpoints(g, order) -> tuple[tuple[int, ...], int]:
    """(the checkpoints: every sqrt(n)-th droppable tensor along ``order``, the segment length)."""
    arrays = GraphArrays.of(g)
    droppable = [t for nid in order if arrays.recomputable[nid]
                 for t in g.nodes[nid].outputs if not arrays.kept[t]]
    segment = max(1, math.isqrt(max(len(droppable) - 1, 0)) + 1)
    return tuple(int(t) for t in np.asarray(droppable, dtype=np.int64)[segment - 1::segment]), segment


def make(request: PlanRequest):
    facts, budget = request.facts, request.budget
    keep, segment = checkpoints(request.graph, facts.order)
    alloc = simple_allocation(facts, budget, request.profile, request.node_seconds)
    options = replace(OPTIONS, keep=keep, max_chain=2 * segment)
    try:
        return plan(request.graph, facts.order, alloc, budget.scratch_bytes, request.profile, request.op_seconds,
                    options, policy=POLICY.name)
    except PlanError as e:      # room a larger budget may give: what it cannot recompute stays on the device
        raise OutOfRoom(f"checkpoint: {e} (it recomputes only, keeping on the device what it cannot recompute: "
                        f"more memory, or capuchin or swapadvisor, which also swap)") from None


POLICY = register(Policy("checkpoint", "recompute only: sqrt(n) segment checkpointing (Chen et al.), graph order, "
                         "no search", make, budget_ladder=True, plans_at_smallest_budget=False))
