"""``checkpoint``: recomputation only, Chen et al.'s sqrt(n) segment checkpointing (2016), on
the graph's own order and a size-class pool sized for it; nothing is copied out.

The tensors a plan could drop (forward activations of recomputable nodes, not kept past the
iteration; a node of several outputs is recomputed whole) are cut, along the order, into
segments of about sqrt(n) of them; the last of each segment is a checkpoint and never leaves
the device. When a size class is full, the swap pass (``planner.swap_planner`` with
``recompute_only``) drops the non-checkpoint activation next used furthest ahead and recomputes
it at its next read from what is still there (a chain of at most two segments' nodes). An
activation a dropped one's chain reads may be dropped too: it is then recreated first, its own
chain's inputs held that long. Unlike the classic scheme it drops only what the budget needs,
so with room to spare it recomputes nothing. No activation is copied out: besides dropped
tensors only those whose host copy is current leave (a parameter before its update, the
batch), read in again when needed.

The pool (``simple_allocation`` with ``firm``) gives each class what cannot leave at its peak
(the checkpoints, the gradients, the resident state and its next values, the outputs of nodes
it cannot recompute) plus one operator's tensors to recompute with, and a share of the rest as
the budget allows; a budget below that does not plan (OutOfRoom).
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from engine.ir import Kind
from engine.units import format_bytes

from ..allocation import simple_allocation
from ..errors import OutOfRoom, PlanError
from ..policy import PlanRequest, Policy, register
from ..swap_planner import GraphArrays, PlanOptions, plan

OPTIONS = PlanOptions(recompute_only=True, order_copies=True, several_outputs=True)


def droppable_tensors(g, order) -> list[int]:
    """The tensors a recompute-only plan may drop, along ``order``: forward activations made by
    recomputable nodes that need not survive the iteration."""
    arrays = GraphArrays.of(g)
    return [t for nid in order if arrays.recomputable_any[nid] for t in g.nodes[nid].outputs
            if not arrays.kept[t] and g.tensors[t].kind == Kind.ACTIVATION]


def checkpoints(g, order) -> tuple[tuple[int, ...], int]:
    """(the checkpoints: every sqrt(n)-th droppable tensor along ``order``, the segment length)."""
    droppable = droppable_tensors(g, order)
    segment = max(1, math.isqrt(max(len(droppable) - 1, 0)) + 1)
    return tuple(int(t) for t in np.asarray(droppable, dtype=np.int64)[segment - 1::segment]), segment


def never_dropped(g, order) -> tuple[np.ndarray, int]:
    """(per tensor, whether the plan keeps it: all but the droppable tensors between
    checkpoints; the segment length)."""
    kept, segment = checkpoints(g, order)
    firm = np.ones(len(g.tensors), dtype=bool)
    firm[droppable_tensors(g, order)] = False
    firm[list(kept)] = True
    return firm, segment


def make(request: PlanRequest):
    facts, budget = request.facts, request.budget
    firm, segment = never_dropped(request.graph, facts.order)
    alloc = simple_allocation(facts, budget, request.profile, request.node_seconds, firm=firm)
    if alloc.pool_bytes > budget.pool_bytes:
        need, have = format_bytes(alloc.pool_bytes), format_bytes(budget.pool_bytes)
        if need == have:
            need, have = f"{alloc.pool_bytes} B", f"{budget.pool_bytes} B"
        raise OutOfRoom(f"checkpoint: what it cannot recompute (its checkpoints, the gradients and the state, "
                        f"with room to recompute beside them) needs a pool of {need}; this budget's has {have}: "
                        "more memory, or capuchin or swapadvisor, which also swap")
    options = replace(OPTIONS, keep=tuple(int(t) for t in np.nonzero(firm)[0]), max_chain=2 * segment)
    try:
        return plan(request.graph, facts.order, alloc, budget.scratch_bytes, request.profile, request.op_seconds,
                    options, policy=POLICY.name)
    except PlanError as e:      # room a larger budget may give: what it cannot recompute stays on the device
        raise OutOfRoom(f"checkpoint: {e} (it recomputes only, keeping on the device what it cannot recompute: "
                        f"more memory, or capuchin or swapadvisor, which also swap)") from None


POLICY = register(Policy("checkpoint", "recompute only: sqrt(n) segment checkpointing (Chen et al.), graph order, "
                         "no search", make, budget_ladder=True, plans_at_smallest_budget=False))
