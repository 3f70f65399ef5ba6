"""``checkpoint``: recomputation only, Chen et al.'s segment checkpointing (2016), on
the graph's own order and a pool sized for it (size classes or va's chunks; ``auto``, the
default: both, the faster kept); nothing is copied out.

The tensors a plan could drop (forward activations of recomputable nodes, not kept past the
iteration; a node of several outputs is recomputed whole) are cut, along the order, into
segments (``segmentations``): every droppable tensor that crosses a cut is a checkpoint and
never leaves the device, so recreating a tensor never reaches past its segment's checkpoints.
When a size class is full, the swap pass (``planner.swap_planner`` with ``recompute_only``)
drops the non-checkpoint activation next used furthest ahead and recomputes it at its next read
from what is still there (its chain inside its segment). An activation a dropped
one's chain reads may be dropped too: it is then recreated first, its own chain's inputs held
that long. Unlike the classic scheme it drops only what the budget needs, so with room to spare
it recomputes nothing. No activation is copied out: besides dropped tensors only those whose
host copy is current leave (a parameter before its update, the batch), read in again when
needed. It plans the segmentation of least estimated peak, then ones of longer segments, and
keeps the fastest.

The pool (``simple_allocation`` or ``chunked_allocation`` with ``firm``) gives each class what
cannot leave at its peak (the checkpoints, the gradients, the resident state and its next
values, the outputs of nodes it cannot recompute) plus one operator's tensors to recompute
with, and a share of the rest as the budget allows; a budget below that does not plan
(OutOfRoom).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterator

import numpy as np

from allocator.registry import CHUNKED, SIZE_CLASSES
from engine.ir import Kind
from engine.units import format_bytes

from ..allocation import chunked_allocation, simple_allocation
from ..errors import OutOfRoom, PlanError
from ..facts_memo import memo
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


# From one segmentation to the next, segments this many times larger. A plan's time is bumpy in
# the segment size (NasNet-25 at 16 GiB: 25 segments 6.52 s, 17 segments 6.06, 13 segments 7.41),
# so a step of 2 walked past its best.
SEGMENT_GROWTH = math.sqrt(2)


@dataclass(frozen=True)
class Segmentation:
    """One way to cut the forward pass: per tensor whether the plan keeps it (``firm``), and the
    most droppable tensors one segment makes (a recomputation's chain stays inside its segment)."""
    firm: np.ndarray
    longest: int
    segments: int


def segmentations(g, order) -> Iterator[Segmentation]:
    """Chen et al.'s segments, on a graph that branches: from the least estimated peak to one segment.

    The nodes making droppable tensors (makers), along ``order``, are cut into segments, and
    every droppable tensor that crosses a cut (made before it, read by a maker after it: NasNet's
    cell inputs, a residual branch) is a checkpoint, so a chain recreating a dropped tensor never
    leaves its segment. Each cut is the cheapest in bytes within its segment's second half. The
    first segmentation is the one whose estimated peak (the checkpoints before a segment beside
    all the segment makes) is least; each next one has segments SEGMENT_GROWTH times larger
    (fewer checkpoints to keep, longer chains to recompute), down to one segment. Cutting every
    n-th tensor instead let chains run around the cut through a parallel branch: on NasNet-25 a
    median chain of 1,614 nodes."""
    droppable = droppable_tensors(g, order)
    firm = np.ones(len(g.tensors), dtype=bool)
    firm[droppable] = False
    if not droppable:
        yield Segmentation(firm, 1, 1)
        return
    chain = _MakerChain(g, order, set(droppable))
    limit = min(_segment_limits(chain.made_bytes), key=lambda lim: chain.peak_estimate(_segment_ends(chain, lim)))
    last = None
    while True:
        ends = _segment_ends(chain, int(limit))
        if ends != last:
            kept = firm.copy()
            for end in ends:
                kept[chain.crossing(end)] = True
            starts = [0] + [e + 1 for e in ends]
            longest = max(chain.tensors_made(a, b) for a, b in zip(starts, [*ends, len(chain.makers) - 1]))
            yield Segmentation(kept, max(1, longest), len(ends) + 1)
        if not ends:
            return
        last, limit = ends, limit * SEGMENT_GROWTH


def _segmentations_of(facts) -> tuple[Segmentation, ...]:
    """``segmentations`` of the facts' graph and order, made once per GraphFacts (they depend on the
    order alone, not the budget: a budget ladder plans checkpoint at every rung; on NasNet-8, 327
    walks through them, 1.9 of the plan's 28 CPU-s); their masks read-only."""
    def make():
        cuts = tuple(segmentations(facts.graph, facts.order))
        for cut in cuts:
            cut.firm.setflags(write=False)
        return cuts
    return memo(facts, ("checkpoint segmentations",), make)


class _MakerChain:
    """The nodes that make droppable tensors, in order (makers), with what a cut after maker i
    keeps: ``cut_bytes[i]``, the droppable bytes made by makers 0..i and read by a later maker."""

    def __init__(self, g, order, droppable: set[int]):
        self.makers: list[int] = []
        self.made_at: dict[int, int] = {}           # droppable tensor -> index of its maker
        for nid in order:
            outs = [t for t in g.nodes[nid].outputs if t in droppable]
            for t in outs:
                self.made_at[t] = len(self.makers)
            if outs:
                self.makers.append(nid)
        m = len(self.makers)
        self.made_bytes = np.zeros(m, dtype=np.int64)
        self.made_count = np.zeros(m, dtype=np.int64)
        for t, i in self.made_at.items():
            self.made_bytes[i] += g.tensors[t].nbytes
            self.made_count[i] += 1
        self.last_read: dict[int, int] = {}         # droppable tensor -> the last maker reading it
        for i, nid in enumerate(self.makers):
            for t in g.nodes[nid].inputs:
                if t in self.made_at:
                    self.last_read[t] = i
        delta = np.zeros(m + 1, dtype=np.int64)
        for t, last in self.last_read.items():
            if last > self.made_at[t]:
                delta[self.made_at[t]] += g.tensors[t].nbytes
                delta[last] -= g.tensors[t].nbytes
        self.cut_bytes = np.cumsum(delta)[:m]
        self.made_prefix = np.cumsum(self.made_bytes)

    def crossing(self, end: int) -> list[int]:
        """The droppable tensors a cut after maker ``end`` keeps."""
        return [t for t, last in self.last_read.items() if self.made_at[t] <= end < last]

    def tensors_made(self, first: int, last: int) -> int:
        return int(self.made_count[first:last + 1].sum())

    def peak_estimate(self, ends: list[int]) -> int:
        """The most bytes a backward pass over these segments holds at once: the checkpoints of
        the segments before one, beside all that one segment makes (Chen et al.'s estimate)."""
        bounds = [-1, *ends, len(self.makers) - 1]
        before, peak = 0, 0
        for k in range(len(bounds) - 1):
            made = int(self.made_prefix[bounds[k + 1]] - (self.made_prefix[bounds[k]] if bounds[k] >= 0 else 0))
            peak = max(peak, before + made)
            before += int(self.cut_bytes[bounds[k + 1]]) if k < len(bounds) - 2 else 0
        return peak


def _segment_limits(made_bytes: np.ndarray, steps: int = 48) -> np.ndarray:
    """Segment sizes to try, in bytes: geometric from the largest maker's to all of them."""
    low, high = max(int(made_bytes.max()), 1), max(int(made_bytes.sum()), 1)
    return np.unique(np.geomspace(low, high, steps).astype(np.int64))


def _segment_ends(chain: _MakerChain, limit: int) -> list[int]:
    """Cuts (the maker each segment ends with) for segments of at most ``limit`` bytes where a
    single maker allows: each at the cheapest cut among the makers that fill the segment's
    second half (the later one on a tie: fewer segments)."""
    prefix, m, ends, start = chain.made_prefix, len(chain.makers), [], 0
    while True:
        base = int(prefix[start - 1]) if start else 0
        full = int(np.searchsorted(prefix, base + limit, side="right")) - 1   # the last maker within limit
        full = max(full, start)
        if full >= m - 1:
            return ends
        half = min(max(int(np.searchsorted(prefix, base + limit // 2, side="left")), start), full)
        window = chain.cut_bytes[half:full + 1]
        end = full - int(np.argmin(window[::-1]))
        ends.append(end)
        start = end + 1


def _allocation(request: PlanRequest, kind: str, firm: np.ndarray):
    """The allocation of ``kind`` sized for a plan that keeps ``firm`` (OutOfRoom where the
    budget's pool cannot hold it)."""
    facts, budget = request.facts, request.budget
    if kind == CHUNKED:
        chunk = int(request.allocator_options.get("chunk_bytes") or CHUNK_BYTES)
        return chunked_allocation(facts, budget, chunk, request.profile, request.op_seconds, firm=firm)
    alloc = simple_allocation(facts, budget, request.profile, request.op_seconds, firm=firm)
    if alloc.pool_bytes > budget.pool_bytes:
        need, have = format_bytes(alloc.pool_bytes), format_bytes(budget.pool_bytes)
        if need == have:
            need, have = f"{alloc.pool_bytes} B", f"{budget.pool_bytes} B"
        raise OutOfRoom(f"what it cannot recompute (its checkpoints, the gradients and the state, with room to "
                        f"recompute beside them) needs a pool of {need}; this budget's has {have}")
    return alloc


def make(request: PlanRequest):
    """The Program of each segmentation in turn (``segmentations``), on each kind of placement
    the allocator gives (``auto``: the size-class pool and chunks), the fastest on the profile
    kept: the walk stops at the first segmentation that plans slower than the fastest before it
    (without a profile, at the first that plans)."""
    g, facts, budget = request.graph, request.facts, request.budget
    best, refusals = None, []
    for cut in _segmentations_of(facts):
        found, refusals = _fastest_kind(request, cut)
        if found is None:
            continue
        if best is not None and found[0] >= best[0]:
            break
        best = found
        if request.profile is None:
            break
    if best is None:
        raise OutOfRoom(f"checkpoint: {'; '.join(refusals)} (it recomputes only, keeping on the device what it "
                        "cannot recompute: more memory, or capuchin or swapadvisor, which also swap)")
    return program_of(g, facts.order, best[1], budget.scratch_bytes, POLICY.name)


def _fastest_kind(request: PlanRequest, cut: Segmentation):
    """((simulated seconds or 0 without a profile, the final arrays) of the fastest kind that
    plans ``cut``, or None; why each kind that did not plan refused)."""
    g, secs = request.graph, request.op_seconds
    options = replace(OPTIONS, keep=tuple(int(t) for t in np.nonzero(cut.firm)[0]), max_chain=2 * cut.longest)
    best, refusals = None, []
    for kind in placement_kinds(POLICY, request.allocator):
        try:
            final = final_arrays(g, request.facts.order, _allocation(request, kind, cut.firm), request.profile,
                                 secs, options)
        except PlanError as e:      # OutOfRoom too: what it cannot recompute stays on the device
            refusals.append(f"{'chunks' if kind == CHUNKED else 'size classes'}: {e}")
            continue
        if request.profile is None:
            return (0.0, final), refusals
        t = simulated_seconds(final[0], GraphArrays.of(g).tensor_bytes, secs, request.profile)
        if best is None or t < best[0]:
            best = (t, final)
    return best, refusals


POLICY = register(Policy("checkpoint", "recompute only: segment checkpointing (Chen et al.) cut where the fewest "
                         "bytes cross, graph order, no search", make, kinds=(SIZE_CLASSES, CHUNKED), budget_ladder=True,
                         plans_at_smallest_budget=False))
