"""The unrestricted size-class mapping of SwapAdvisor's Figure 9c: any size to any class.

The paper prunes the mapping CLS to monotone runs (each entry equal to or one above the one
before: O(2^N) mappings of N sizes) and shows, in Figure 9c, the search without that pruning
(O(N^N)) doing worse. ``UnrestrictedAllocation`` is the allocation without it: ``cls[i]`` is
any class, a class's object holds the largest size mapped to it, and a small size may share
a class with a large one while a size between them has a class of its own. Everything that
places tensors reads only the per-size class and the per-class object size
(``SizeClassLayout``, the swap planner), so a plan on one is planned, verified and simulated
as on a restricted one.

Labels are canonical: classes are numbered by their object size (the class of the largest
size last), so one mapping has one encoding and the search's genome keys stay exact. The
restricted CLS are the canonical mappings whose classes are runs, so every restricted
allocation is also a valid unrestricted one (``widened``).
"""
from __future__ import annotations

import numpy as np

from allocator.size_classes import MAPPINGS, Allocation, class_last_sizes


def canonical_labels(labels) -> np.ndarray:
    """``labels`` (any non-negative integers, one per sorted size) renumbered 0..K-1 by each
    class's largest size: the same grouping of sizes, in its one canonical encoding."""
    labels = np.asarray(labels, dtype=np.int64)
    _, dense = np.unique(labels, return_inverse=True)
    last = class_last_sizes(dense)
    rank = np.empty(last.size, dtype=np.int64)
    rank[np.argsort(last)] = np.arange(last.size)
    return rank[dense]


def mapping_problem(cls: np.ndarray) -> str | None:
    """Why ``cls`` is not a canonical unrestricted mapping, or None."""
    if cls.size == 0:
        return "has no entries"
    if cls.min() < 0:
        return f"has a negative class {int(cls.min())}"
    if not np.array_equal(cls, canonical_labels(cls)):
        return "must number its classes 0..K-1 in the order of their largest sizes (canonical_labels)"
    return None


class UnrestrictedAllocation(Allocation):
    """An ``Allocation`` whose CLS is any canonical mapping (module docstring); not chunked."""

    @staticmethod
    def mapping_problem(cls: np.ndarray) -> str | None:
        return mapping_problem(cls)

    def __post_init__(self):
        super().__post_init__()
        if self.chunk_bytes:
            raise ValueError("an unrestricted allocation has no chunk class")

    def to_dict(self) -> dict:
        return {**super().to_dict(), "mapping": "unrestricted"}

    def __repr__(self):
        return "Unrestricted" + super().__repr__()

    def __str__(self):
        lines = [f"Unrestricted allocation: {self.num_classes} size classes, {self.num_objects} objects, "
                 f"pool {self.pool_bytes} bytes"]
        for k in range(self.num_classes):
            members = np.flatnonzero(self.cls == k)
            lines.append(f"  class {k}: {self.cnt[k]} x {int(self.class_object_bytes[k])} bytes for sizes "
                         f"{', '.join(str(int(self.sizes[i])) for i in members)}")
        return "\n".join(lines)


MAPPINGS["unrestricted"] = UnrestrictedAllocation     # what from_dict makes of {"mapping": "unrestricted"}


def widened(alloc: Allocation) -> UnrestrictedAllocation:
    """A restricted allocation as the unrestricted one it also is (same classes and counts)."""
    if isinstance(alloc, UnrestrictedAllocation):
        return alloc
    if alloc.chunk_bytes:
        raise ValueError("a chunked allocation has no unrestricted counterpart")
    return UnrestrictedAllocation(alloc.sizes, alloc.cls, alloc.cnt)


def class_counts_from_extended(cls, extended) -> np.ndarray:
    """CNT from one count per size (CNTEXT) for any mapping: the mean of each class's entries,
    rounded half up, at least 1 (``counts_from_extended`` for classes that are not runs)."""
    cls = np.asarray(cls, dtype=np.int64)
    extended = np.asarray(extended, dtype=np.int64)
    total = np.bincount(cls, weights=extended).astype(np.int64)
    members = np.bincount(cls)
    return np.maximum((2 * total + members) // (2 * members), 1)
