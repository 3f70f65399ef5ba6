"""Allocation crossover, mutation and repair to the pool's bytes (SwapAdvisor Section 5.3).

An allocation is ``allocator.Allocation`` (TS, CLS, CNT; classes 0-based). ``pool_bytes`` is
what its objects may use: ``planner.budget.Budget.pool_bytes`` (scratch is apart). The operators:

- ``crossover(a1, a2, point, ...)``: Figure 5. CLS child 1 is CLS2[:point] + CLS1[point:],
  child 2 the other way round, each fixed by ``repair_cls``. CNT is crossed the same way as
  extended counts (``extended_counts``: one count per size) and folded back per class of the
  repaired CLS by averaging (``counts_from_extended``).
- ``mutate(a, prob, ...)``: each CLS entry after the first, with probability ``prob``: if it
  equals its predecessor it goes up by 1, if it is one more it goes down by 1, and every
  entry after it moves with it (so the step at that index flips and the others are kept).
  Counts are carried to the new classes through extended counts; then each count, with
  probability ``prob``, is redrawn from a Gaussian centred on it (sd ``sigma`` x count, at
  least 1), rounded and kept >= 1.
- ``transfer(a, ...)`` (not in the paper): one class gains objects and another gives up the
  bytes, the pool's total unchanged. Repair spreads a count mutation's cost over every class,
  so a move that helps only when one class pays for another (an object more for the largest
  class, the one the swaps of its tensors wait for, paid by hundreds of small activation
  objects) is one the Gaussian mutation almost never makes.
- ``repair_counts`` (after both): every class is raised to its minimum (the most tensors of
  that class one operator touches, so that every operator can run), then counts above the
  minima are shrunk as the paper's CNT repair does (``allocator.repair_cnt``: each class
  gives up the same bytes, so counts fall inversely to object size) until the objects fit
  ``pool_bytes``. When the minima alone exceed it the child is infeasible: it is
  returned at its minima, over ``pool_bytes``, and the search gives it an infinite time.
"""
from __future__ import annotations

import numpy as np

from allocator import (Allocation, AllocationDoesNotFit, counts_from_extended, extended_counts,
                       random_allocation as allocator_random_allocation, repair_cls, repair_cnt)

from .context import GraphContext

DEFAULT_SIGMA = 0.25   # Gaussian count mutation: sd as a fraction of the count (the paper gives none)


def repair_counts(sizes, cls, cnt, minima, pool_bytes: int, kind: type = Allocation) -> Allocation:
    """(CLS, CNT) with every count >= its class minimum, shrunk above the minima to fit
    ``pool_bytes``; over it (at the minima) only when the minima alone do not fit. ``kind``:
    the Allocation class to make (Figure 9c's search makes ``UnrestrictedAllocation``s)."""
    cnt = np.maximum(np.asarray(cnt, dtype=np.int64), minima)
    alloc = kind(sizes, cls, cnt)
    if alloc.pool_bytes <= pool_bytes:
        return alloc
    base = np.asarray(minima, dtype=np.int64) - 1          # counts never go below base + 1
    reserved = int(base @ alloc.class_slot_bytes)
    try:
        extra = repair_cnt(alloc.with_counts(cnt - base), pool_bytes - reserved)
    except AllocationDoesNotFit:
        return alloc.with_counts(minima)
    return alloc.with_counts(extra.cnt + base)


def fit(ctx: GraphContext, cls, cnt, pool_bytes: int, kind: type = Allocation) -> Allocation:
    """``repair_counts`` with the graph's class minima for ``cls``."""
    return repair_counts(ctx.sizes, cls, cnt, ctx.class_minima(cls), pool_bytes, kind)


def is_feasible(ctx: GraphContext, alloc: Allocation, pool_bytes: int) -> bool:
    """Within ``pool_bytes``, and every class at or above its minimum."""
    return alloc.pool_bytes <= pool_bytes and bool(np.all(alloc.cnt >= ctx.class_minima(alloc.cls)))


def crossover_lists(x1, x2, point: int) -> tuple[np.ndarray, np.ndarray]:
    """One-point crossover of two equal-length lists: (x2[:p] + x1[p:], x1[:p] + x2[p:])."""
    x1, x2 = np.asarray(x1), np.asarray(x2)
    return np.concatenate((x2[:point], x1[point:])), np.concatenate((x1[:point], x2[point:]))


def crossover(ctx: GraphContext, a1: Allocation, a2: Allocation, point: int,
              pool_bytes: int) -> tuple[Allocation, Allocation]:
    """Figure 5's two children of ``a1`` and ``a2`` at ``point``, repaired to ``pool_bytes``."""
    if not np.array_equal(a1.sizes, a2.sizes):
        raise ValueError("allocations to cross over must share their tensor sizes")
    cls_children = crossover_lists(a1.cls, a2.cls, point)
    ext_children = crossover_lists(extended_counts(a1), extended_counts(a2), point)
    children = []
    for cls, ext in zip(cls_children, ext_children):
        cls = repair_cls(cls)
        children.append(fit(ctx, cls, counts_from_extended(cls, ext), pool_bytes))
    return children[0], children[1]


def random_crossover(ctx: GraphContext, a1: Allocation, a2: Allocation, pool_bytes: int,
                     rng: np.random.Generator) -> tuple[Allocation, Allocation]:
    """``crossover`` at a point drawn uniformly from 1..N-1 (N sizes; 0 when N < 2)."""
    n = a1.sizes.size
    point = int(rng.integers(1, n)) if n > 1 else 0
    return crossover(ctx, a1, a2, point, pool_bytes)


def mutate_cls(cls, prob: float, rng: np.random.Generator) -> np.ndarray:
    """Each entry after the first, with probability ``prob``, +1 if equal to its predecessor,
    -1 if one above it, with everything after it shifted the same way."""
    cls = np.asarray(cls, dtype=np.int64)
    flips = rng.random(max(cls.size - 1, 0)) < prob
    steps = np.diff(cls) ^ flips
    return np.concatenate(([0], np.cumsum(steps)))


def mutate_counts(cnt, prob: float, rng: np.random.Generator, sigma: float = DEFAULT_SIGMA) -> np.ndarray:
    """Each count, with probability ``prob``, redrawn from N(count, (sigma*count)^2), sd >= 1."""
    cnt = np.asarray(cnt, dtype=np.int64)
    hit = rng.random(cnt.size) < prob
    drawn = rng.normal(cnt, np.maximum(sigma * cnt, 1.0))
    return np.where(hit, np.maximum(np.rint(drawn), 1).astype(np.int64), cnt)


def mutate(ctx: GraphContext, alloc: Allocation, prob: float, pool_bytes: int, rng: np.random.Generator,
           sigma: float = DEFAULT_SIGMA) -> Allocation:
    """CLS mutation, counts carried over by extended counts, count mutation, then repair."""
    cls = mutate_cls(alloc.cls, prob, rng)
    cnt = counts_from_extended(cls, extended_counts(alloc))
    return fit(ctx, cls, mutate_counts(cnt, prob, rng, sigma), pool_bytes)


def transfer(ctx: GraphContext, alloc: Allocation, pool_bytes: int, rng: np.random.Generator) -> Allocation:
    """``alloc`` with one class (drawn uniformly) given 1-3 objects, or as many as the bytes
    freed allow, and another (drawn among those above their minimum) giving up as few of its
    objects as pays for them; the receiver never goes above its sizes' peak demand. Unchanged
    when the drawn pair cannot trade."""
    cnt = alloc.cnt.copy()
    n = cnt.size
    if n < 2:
        return alloc
    slot = alloc.class_slot_bytes.astype(np.int64)
    minima = ctx.class_minima(alloc.cls)
    peaks = np.maximum(ctx.class_peaks(alloc.cls), minima)
    spare = pool_bytes - int(cnt @ slot)
    receiver = int(rng.integers(n))
    gain = min(int(rng.integers(1, 4)), int(peaks[receiver] - cnt[receiver]))
    donors = [j for j in range(n) if j != receiver and cnt[j] > minima[j]]
    if gain <= 0 or not donors:
        return alloc
    donor = donors[int(rng.integers(len(donors)))]
    cost = max(gain * int(slot[receiver]) - spare, 0)
    give = -(-cost // int(slot[donor]))
    if cnt[donor] - give < minima[donor]:
        return alloc
    # The donor's objects may free more than the gain costs: the receiver takes what fits.
    gain = min(int(peaks[receiver] - cnt[receiver]), (give * int(slot[donor]) + spare) // int(slot[receiver]))
    cnt[receiver] += gain
    cnt[donor] -= give
    return alloc.with_counts(cnt)


def random_allocation(ctx: GraphContext, pool_bytes: int, rng: np.random.Generator,
                      attempts: int = 8) -> Allocation:
    """A random allocation within ``pool_bytes`` and at or above the class minima.

    ``allocator.random_allocation`` draws the CLS and a random split of ``pool_bytes`` (counts
    capped at the sizes' peak demand); ``fit`` raises it to the class minima. A CLS whose
    minima do not fit is redrawn, up to ``attempts`` times; then the CLS of the cheapest
    allocation that runs every operator (``ctx.minimal_cls``) is used with random counts.
    That one is over ``pool_bytes`` (infeasible) only when no allocation fits.
    """
    for _ in range(attempts):
        drawn = allocator_random_allocation(ctx.sizes, pool_bytes, rng, max_counts=ctx.size_peak)
        alloc = fit(ctx, drawn.cls, drawn.cnt, pool_bytes)
        if alloc.pool_bytes <= pool_bytes:
            return alloc
    cls = ctx.minimal_cls
    minima = ctx.class_minima(cls)
    slot = ctx.class_slot_bytes(cls)
    spare = max(pool_bytes - int(minima @ slot), 0)
    share = rng.random(minima.size)
    extra = np.floor(share / share.sum() * spare / slot).astype(np.int64)
    cnt = np.minimum(minima + extra, np.maximum(ctx.class_peaks(cls), minima))
    return fit(ctx, cls, cnt, pool_bytes)
