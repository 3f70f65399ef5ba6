"""``checkpoint``: recomputation only, Chen et al.'s sqrt(n) segment checkpointing (2016), on
the graph's own order and a pool sized for it (size classes or va's chunks; ``auto``, the
default: both, the faster kept); nothing is copied out.

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

The pool (``simple_allocation`` or ``chunked_allocation`` with ``firm``) gives each class what
cannot leave at its peak (the checkpoints, the gradients, the resident state and its next
values, the outputs of nodes it cannot recompute) plus one operator's tensors to recompute
with, and a share of the rest as the budget allows; a budget below that does not plan
(OutOfRoom).
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from allocator.registry import CHUNKED, SIZE_CLASSES
from engine.ir import Kind
from engine.units import format_bytes

from ..allocation import chunked_allocation, simple_allocation
from ..errors import OutOfRoom, PlanError
from ..policy import PlanRequest, Policy, placement_kinds, register
from ..simulate import simulated_seconds
from ..swap_planner import GraphArrays, PlanOptions, final_arrays, program_of
from .swapadvisor import CHUNK_BYTES

OPTIONS = PlanOptions(recompute_only=True, order_copies=True, several_outputs=True)


def droppable_tensors(g, order) -> list[int]:
    """The tensors a recompute-only plan may drop, along ``order``: forward activations made by
    recomputable nodes that need not survive the iteration."""
    arrays = GraphArrays.of(g)
    return [t for nid in order if arrays.recomputable_any[nid] for t in g.nodes[nid].outputs
            if not arrays.kept[t] and g.tensors[t].kind == Kind.ACTIVATION]


def never_dropped(g, order) -> tuple[np.ndarray, int]:
    """(per tensor, whether the plan keeps it: all but the droppable tensors between
    checkpoints, every sqrt(n)-th droppable one along ``order``; the segment length)."""
    droppable = np.asarray(droppable_tensors(g, order), dtype=np.int64)
    segment = max(1, math.isqrt(max(len(droppable) - 1, 0)) + 1)
    firm = np.ones(len(g.tensors), dtype=bool)
    firm[droppable] = False
    firm[droppable[segment - 1::segment]] = True
    return firm, segment


def _allocation(request: PlanRequest, kind: str, firm: np.ndarray):
    """The allocation of ``kind`` sized for a plan that keeps ``firm`` (OutOfRoom where the
    budget's pool cannot hold it)."""
    facts, budget = request.facts, request.budget
    if kind == CHUNKED:
        chunk = int(request.allocator_options.get("chunk_bytes") or CHUNK_BYTES)
        return chunked_allocation(facts, budget, chunk, request.profile, request.node_seconds, firm=firm)
    alloc = simple_allocation(facts, budget, request.profile, request.node_seconds, firm=firm)
    if alloc.pool_bytes > budget.pool_bytes:
        need, have = format_bytes(alloc.pool_bytes), format_bytes(budget.pool_bytes)
        if need == have:
            need, have = f"{alloc.pool_bytes} B", f"{budget.pool_bytes} B"
        raise OutOfRoom(f"what it cannot recompute (its checkpoints, the gradients and the state, with room to "
                        f"recompute beside them) needs a pool of {need}; this budget's has {have}")
    return alloc


def make(request: PlanRequest):
    """The Program on each kind of placement the allocator gives (``auto``: the size-class pool
    and chunks), the faster on the profile kept (without one, the first that plans)."""
    g, facts, budget, secs = request.graph, request.facts, request.budget, request.op_seconds
    firm, segment = never_dropped(g, facts.order)
    options = replace(OPTIONS, keep=tuple(int(t) for t in np.nonzero(firm)[0]), max_chain=2 * segment)
    best, refusals = None, []
    for kind in placement_kinds(POLICY, request.allocator):
        try:
            final = final_arrays(g, facts.order, _allocation(request, kind, firm), request.profile, secs, options)
        except PlanError as e:      # OutOfRoom too: what it cannot recompute stays on the device
            refusals.append(f"{'chunks' if kind == CHUNKED else 'size classes'}: {e}")
            continue
        if request.profile is None:
            best = (None, final)
            break
        t = simulated_seconds(final[0], GraphArrays.of(g).tensor_bytes, secs, request.profile)
        if best is None or t < best[0]:
            best = (t, final)
    if best is None:
        raise OutOfRoom(f"checkpoint: {'; '.join(refusals)} (it recomputes only, keeping on the device what it "
                        "cannot recompute: more memory, or capuchin or swapadvisor, which also swap)")
    return program_of(g, facts.order, best[1], budget.scratch_bytes, POLICY.name)


POLICY = register(Policy("checkpoint", "recompute only: sqrt(n) segment checkpointing (Chen et al.), graph order, "
                         "no search", make, kinds=(SIZE_CLASSES, CHUNKED), budget_ladder=True,
                         plans_at_smallest_budget=False))
