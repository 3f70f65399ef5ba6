"""Size-class allocations derived from a graph's demand: the minimal one, the simple one, the
unlimited one.

An operator runs only if its inputs and outputs are all resident at once, so
each size class needs at least as many objects as any one operator uses of
that class (an updated state reuses its old value's object, so it needs none).
The minimal allocation is the cheapest grouping of the sorted sizes into classes
under that rule, found by dynamic programming over class boundaries; the smallest
budget (``GraphFacts.smallest_budget``) is its bytes plus operator scratch.
"""
from __future__ import annotations

import numpy as np

from allocator import Allocation, aligned_bytes

from .budget import Budget
from .facts import GraphFacts, SizeDemand


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


def simple_allocation(facts: GraphFacts, budget: Budget) -> Allocation:
    """One class per distinct size if each size's per-operator minimum fits the budget (else
    the minimal allocation's classes); each class gets its minimum, then a common fraction
    of the objects it would need for no swapping at all, as far as the budget's pool allows."""
    d = facts.demand
    budget = budget.pool_bytes
    slot = aligned_bytes(d.sizes)
    if int((slot * d.minimum).sum()) > budget:
        return _grow(facts.minimal_allocation, d, budget)
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


def unlimited_allocation(facts: GraphFacts) -> Allocation:
    """Enough objects of every size that nothing is ever evicted (the ideal baseline)."""
    d = facts.demand
    return Allocation(d.sizes, np.arange(len(d.sizes)), np.maximum(d.peak, 1))
