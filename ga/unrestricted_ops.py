"""The allocation operators of SwapAdvisor's Figure 9c: the search with the size-class mapping
unrestricted (any size to any class, allocator.unrestricted_classes), the comparison that
motivates the paper's pruning to monotone runs (Section 5.3: O(N^N) mappings instead of O(2^N)).

The paper says only that 9c's mapping is unrestricted, not how its GA varies one, so these are
the restricted operators (``allocation_ops``) with the pruning taken out and nothing added:

- random: each size gets a class drawn uniformly from N labels (N sizes), counts a random split
  of the pool as the restricted first generation's;
- crossover: Figure 5's one-point crossover of the CLS lists and of the extended counts, with no
  CLS repair (every mapping is valid), each class's count the mean of its sizes' extended counts;
- mutation: each CLS entry with probability P moves to a class drawn uniformly from the existing
  ones and one new class (the unrestricted counterpart of "one up or one down"), counts carried by
  extended counts, then the Gaussian count mutation;
- repair: ``allocation_ops.fit`` (class minima, then the paper's CNT repair), unchanged.

Labels are made canonical after every operator (``canonical_labels``), so equal mappings are
equal genomes; the crossover therefore crosses canonical labels, as the paper's crosses CLS lists.
"""
from __future__ import annotations

import numpy as np

from allocator import Allocation, extended_counts
from allocator.unrestricted_classes import (UnrestrictedAllocation, canonical_labels,
                                            class_counts_from_extended, widened)

from .allocation_ops import crossover_lists, fit, mutate_counts, random_allocation as restricted_random
from .context import GraphContext


def _fit(ctx: GraphContext, labels, extended, pool_bytes: int) -> UnrestrictedAllocation:
    """The allocation of ``labels`` (any) with counts from ``extended`` (one per size), repaired."""
    cls = canonical_labels(labels)
    return fit(ctx, cls, class_counts_from_extended(cls, extended), pool_bytes, UnrestrictedAllocation)


def random_allocation(ctx: GraphContext, pool_bytes: int, rng: np.random.Generator,
                      attempts: int = 8) -> UnrestrictedAllocation:
    """A uniformly random mapping with a random split of the pool, fitted; redrawn up to
    ``attempts`` times while its class minima do not fit, then the restricted first
    generation's fallback (the cheapest runnable CLS, ``allocation_ops.random_allocation``)."""
    n = ctx.num_sizes
    for _ in range(attempts):
        cls = canonical_labels(rng.integers(0, n, size=n))
        slot = ctx.class_slot_bytes(cls)
        share = rng.random(slot.size)
        cnt = np.maximum(np.floor(share / share.sum() * pool_bytes / slot).astype(np.int64), 1)
        cnt = np.minimum(cnt, np.maximum(ctx.class_peaks(cls), 1))
        alloc = fit(ctx, cls, cnt, pool_bytes, UnrestrictedAllocation)
        if alloc.pool_bytes <= pool_bytes:
            return alloc
    return widened(restricted_random(ctx, pool_bytes, rng))


def crossover(ctx: GraphContext, a1: Allocation, a2: Allocation, point: int,
              pool_bytes: int) -> tuple[UnrestrictedAllocation, UnrestrictedAllocation]:
    """Figure 5's two children at ``point`` without the CLS repair, counts averaged per class."""
    cls_children = crossover_lists(a1.cls, a2.cls, point)
    ext_children = crossover_lists(extended_counts(a1), extended_counts(a2), point)
    return tuple(_fit(ctx, cls, ext, pool_bytes) for cls, ext in zip(cls_children, ext_children))


def random_crossover(ctx: GraphContext, a1: Allocation, a2: Allocation, pool_bytes: int,
                     rng: np.random.Generator) -> tuple[UnrestrictedAllocation, UnrestrictedAllocation]:
    """``crossover`` at a point drawn uniformly from 1..N-1 (N sizes; 0 when N < 2)."""
    n = a1.sizes.size
    return crossover(ctx, a1, a2, int(rng.integers(1, n)) if n > 1 else 0, pool_bytes)


def mutate_labels(cls, prob: float, rng: np.random.Generator) -> np.ndarray:
    """Each entry, with probability ``prob``, moved to a class drawn from the K existing and one new."""
    cls = np.asarray(cls, dtype=np.int64)
    hit = rng.random(cls.size) < prob
    drawn = rng.integers(0, int(cls.max()) + 2, size=cls.size)
    return np.where(hit, drawn, cls)


def mutate(ctx: GraphContext, alloc: Allocation, prob: float, pool_bytes: int, rng: np.random.Generator,
           sigma: float) -> UnrestrictedAllocation:
    """Label mutation, counts carried over by extended counts, count mutation, then repair."""
    labels = canonical_labels(mutate_labels(alloc.cls, prob, rng))
    cnt = class_counts_from_extended(labels, extended_counts(alloc))
    return fit(ctx, labels, mutate_counts(cnt, prob, rng, sigma), pool_bytes, UnrestrictedAllocation)
