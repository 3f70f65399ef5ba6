"""Allocations derived from a graph: demand per tensor size, the smallest budget, a simple allocation.

An operator runs only if its inputs and outputs are all resident at once, so
each size class needs at least as many objects as any one operator uses of
that class (an updated state reuses its old value's object, so it needs none).
The smallest budget is the cheapest grouping of the sorted sizes into classes
under that rule, found by dynamic programming over class boundaries; a budget
below it is refused with a message naming the operator that needs the most
memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from allocator import Allocation, aligned_bytes
from engine.inplace import in_place_pairs
from engine.ir import Graph
from engine.liveness import lifetimes
from engine.units import format_bytes

from .swap_planner import PlanError, reserved_scratch


@dataclass
class SizeDemand:
    sizes: np.ndarray         # TS: distinct tensor sizes, ascending
    size_index: np.ndarray    # per tensor id: its index in sizes
    peak: np.ndarray          # per size: most tensors of that size live at once (unlimited run)
    minimum: np.ndarray       # per size: most tensors of that size one operator touches
    per_node: np.ndarray      # [node, size]: how many objects of that size the node needs at once
    heaviest_node: int        # the node whose inputs and outputs need the most bytes
    heaviest_bytes: int
    scratch: int = 0          # operator scratch reserved at the arena's end (Graph.scratch_bytes)

    def pool_budget(self, budget: int) -> int:
        """What a device budget leaves for the pool's objects once scratch is reserved."""
        return int(budget) - self.scratch


def size_demand(g: Graph, order: Sequence[int]) -> SizeDemand:
    nbytes = np.array([t.nbytes for t in g.tensors], dtype=np.int64)
    sizes, size_index = np.unique(nbytes, return_inverse=True)
    lt = lifetimes(g, order)
    n_steps = max(1, len(order))
    live = np.zeros((len(sizes), n_steps + 1), dtype=np.int64)
    counted, end = lt.storage()     # an in-place chain is one object
    np.add.at(live, (size_index[counted], lt.start[counted]), 1)
    np.add.at(live, (size_index[counted], end[counted] + 1), -1)
    peak = np.cumsum(live, axis=1)[:, :n_steps].max(axis=1)
    per_node = np.zeros((len(g.nodes), len(sizes)), dtype=np.int32)
    heaviest, heaviest_bytes = -1, -1
    for n in g.nodes:
        in_place = {n.outputs[k] for k, _ in in_place_pairs(n)}
        ts = [t for t in dict.fromkeys(n.inputs + n.outputs) if t not in in_place]
        np.add.at(per_node[n.id], size_index[ts], 1)
        b = int(nbytes[ts].sum())
        if b > heaviest_bytes:
            heaviest, heaviest_bytes = n.id, b
    minimum = per_node.max(axis=0).astype(np.int64) if len(g.nodes) else np.zeros(len(sizes), np.int64)
    return SizeDemand(sizes, size_index, np.maximum(peak, minimum), minimum, per_node, heaviest, heaviest_bytes,
                      reserved_scratch(g))


def minimal_allocation(d: SizeDemand) -> Allocation:
    """The allocation of fewest bytes that can run every operator: classes are runs of
    consecutive sizes (object = the run's largest size), each with as many objects as
    any one operator needs from the run. Exact, by dynamic programming over run ends."""
    s = len(d.sizes)
    slot = aligned_bytes(d.sizes)
    cum = np.concatenate([np.zeros((d.per_node.shape[0], 1), np.int64), np.cumsum(d.per_node, axis=1)], axis=1)
    best = np.full(s + 1, np.inf)
    best[0] = 0
    cut = np.zeros(s + 1, dtype=np.int64)
    need = np.zeros((s, s), dtype=np.int64)        # need[i, j]: objects for a class of sizes i..j
    for i in range(s):
        need[i, i:] = np.maximum((cum[:, i + 1:] - cum[:, [i]]).max(axis=0, initial=0), 1)
    for j in range(1, s + 1):
        costs = best[:j] + slot[j - 1] * need[np.arange(j), j - 1]
        cut[j] = int(np.argmin(costs))
        best[j] = costs[cut[j]]
    bounds, j = [], s
    while j > 0:
        bounds.append((cut[j], j))
        j = cut[j]
    bounds.reverse()
    cls = np.concatenate([np.full(b - a, k) for k, (a, b) in enumerate(bounds)])
    cnt = np.array([need[a, b - 1] for a, b in bounds], dtype=np.int64)
    return Allocation(d.sizes, cls, cnt)


def smallest_budget(d: SizeDemand) -> int:
    """Device bytes of the minimal allocation plus operator scratch: no budget below it can
    run every operator."""
    return int(minimal_allocation(d).pool_bytes) + d.scratch


def check_budget(g: Graph, d: SizeDemand, budget: int) -> None:
    """PlanError naming the heaviest operator if ``budget`` is below the smallest that runs."""
    need = smallest_budget(d)
    if budget < need:
        node = g.nodes[d.heaviest_node]
        scratch = f", plus {format_bytes(d.scratch)} of operator scratch" if d.scratch else ""
        raise PlanError(f"a budget of {format_bytes(budget)} cannot run {node.name} ({node.op}; its inputs "
                        f"and outputs alone need {format_bytes(d.heaviest_bytes)}{scratch}); the smallest "
                        f"budget that runs this model is {format_bytes(need)}")


def simple_allocation(g: Graph, order: Sequence[int], budget: int) -> Allocation:
    """One class per distinct size if each size's per-operator minimum fits the budget (else
    the minimal allocation's classes); each class gets its minimum, then a common fraction
    of the objects it would need for no swapping at all, as far as the budget allows.
    ``budget`` is device bytes: the objects get what operator scratch leaves."""
    d = size_demand(g, order)
    check_budget(g, d, budget)
    budget = d.pool_budget(budget)
    slot = aligned_bytes(d.sizes)
    if int((slot * d.minimum).sum()) > budget:
        return _grow(minimal_allocation(d), d, budget)
    spare = budget - int((slot * d.minimum).sum())
    extra = d.peak - d.minimum
    want = int((slot * extra).sum())
    frac = 1.0 if want <= spare else spare / want
    cnt = d.minimum + np.floor(extra * frac).astype(np.int64)
    # Spend what flooring left, largest sizes first, without exceeding their peak.
    left = budget - int((slot * cnt).sum())
    for k in np.argsort(-slot):
        add = min(int(d.peak[k] - cnt[k]), left // int(slot[k]))
        cnt[k] += add
        left -= add * int(slot[k])
    return Allocation(d.sizes, np.arange(len(d.sizes)), np.maximum(cnt, 1))


def _grow(alloc: Allocation, d: SizeDemand, budget: int) -> Allocation:
    """Add objects to a fitting allocation, largest classes first, up to each class's peak
    demand (the sum of its sizes' peaks) while the budget allows."""
    cnt = alloc.cnt.copy()
    slot = alloc.class_slot_bytes
    peak = np.bincount(alloc.cls, weights=d.peak).astype(np.int64)
    left = budget - int((slot * cnt).sum())
    for k in np.argsort(-slot):
        add = max(0, min(int(peak[k] - cnt[k]), left // int(slot[k])))
        cnt[k] += add
        left -= add * int(slot[k])
    return alloc.with_counts(cnt)


def unlimited_allocation(g: Graph, order: Sequence[int]) -> Allocation:
    """Enough objects of every size that nothing is ever evicted (the ideal baseline)."""
    d = size_demand(g, order)
    return Allocation(d.sizes, np.arange(len(d.sizes)), np.maximum(d.peak, 1))
