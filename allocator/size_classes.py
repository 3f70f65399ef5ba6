"""The size-class encoding of a memory allocation (SwapAdvisor, Sec 4.1 and 5.3).

An allocation is the paper's pair (CLS, CNT) over TS, the sorted distinct tensor byte sizes:

- ``sizes`` (TS): strictly increasing positive byte sizes.
- ``cls`` (CLS): the size class of each size. Classes are numbered from 0 here (the paper
  counts from 1). Valid sequences start at 0 and each step is 0 or 1 (the paper's pruning:
  consecutive sizes go to the same or the next class), so classes are contiguous runs of sizes.
- ``cnt`` (CNT): the number of objects in each class, ``len(cnt) == cls[-1] + 1``.
  Every count is at least 1: every size is mapped to some class, and a class with no
  objects would leave the tensors of its sizes nowhere to live, so no plan could run.

A class's object holds the largest size mapped to it; in the pool each object is padded to
ALIGNMENT bytes.

A chunked allocation (``chunk_bytes`` > 0) makes its last class the chunk class: its objects
are chunks of ``chunk_bytes``, and a tensor of one of its sizes takes ceil(size / chunk) of
them, any of them (placed through virtual addressing, as paper 001's allocator does), so the
sizes it serves share its memory without fragmentation. The chunks start at a multiple of
``chunk_bytes`` after the other classes' objects (what a page table maps whole).

This module also holds the budget-free repairs of Sec 5.3 (``repair_cls``,
``extended_counts``, ``counts_from_extended``); fitting a byte budget lives in ``fitting.py``.
Nothing here knows what a tensor is: only integer sizes and numpy arrays.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from engine.units import format_bytes

ALIGNMENT = 256  # bytes; every pool object starts and ends on this boundary
CHUNK_UNIT = 4096  # bytes; a chunk is a whole number of pages (the finest a backend maps)

_DICT_KEYS = ("sizes", "cls", "cnt")


def aligned_bytes(nbytes):
    """Round byte counts (int or int array) up to a multiple of ALIGNMENT."""
    return -(-np.asarray(nbytes, dtype=np.int64) // ALIGNMENT) * ALIGNMENT


def distinct_sizes(tensor_bytes) -> np.ndarray:
    """TS: the sorted distinct byte sizes (int64) of an iterable or array of tensor sizes."""
    values = tensor_bytes if isinstance(tensor_bytes, np.ndarray) else list(tensor_bytes)
    return np.unique(np.asarray(values, dtype=np.int64))




def class_last_sizes(cls) -> np.ndarray:
    """Per class, the index of its largest size: the right end of each run of a valid CLS, and
    the last index carrying each label of an unrestricted mapping (``unrestricted_classes``)."""
    cls = np.asarray(cls, dtype=np.int64)
    last = np.zeros(int(cls.max()) + 1, dtype=np.int64)
    np.maximum.at(last, cls, np.arange(cls.size))     # sizes are sorted: the last index is the largest
    return last


def _int_vector(name: str, values) -> np.ndarray:
    """A read-only int64 copy of a 1-D integer sequence, or ValueError naming `name`."""
    if (isinstance(values, np.ndarray) and values.dtype == np.int64 and values.ndim == 1
            and not values.flags.writeable and values.flags.owndata):
        return values  # already one of ours (e.g. shared by with_counts): no copy needed
    array = np.array(values, copy=True)
    if array.ndim != 1:
        raise ValueError(f"allocation {name} must be a flat list of integers, got shape {array.shape}")
    if array.size and not (np.issubdtype(array.dtype, np.integer) and array.dtype != np.bool_):
        raise ValueError(f"allocation {name} must hold integers, got {array.dtype}")
    array = array.astype(np.int64)
    array.setflags(write=False)
    return array


def cls_problem(cls: np.ndarray) -> str | None:
    """Why `cls` is not a valid CLS (start at 0, steps of 0 or 1), or None if it is."""
    if cls.size == 0:
        return "has no entries"
    if cls[0] != 0:
        return f"must start at class 0, starts at {cls[0]}"
    steps = np.diff(cls)
    bad = np.flatnonzero((steps < 0) | (steps > 1))
    if bad.size:
        i = int(bad[0]) + 1
        return f"must rise by 0 or 1 per size, goes {cls[i - 1]} -> {cls[i]} at index {i}"
    return None


@dataclass(frozen=True, eq=False)
class Allocation:
    """A validated (TS, CLS, CNT) triple; arrays are read-only int64 copies.

    Inputs: ``sizes`` strictly increasing positive bytes; ``cls`` a valid CLS of the same
    length; ``cnt`` one count >= 1 per class. Raises ValueError with one line otherwise.
    """

    sizes: np.ndarray
    cls: np.ndarray
    cnt: np.ndarray
    chunk_bytes: int = 0      # > 0: the last class is the chunk class (module docstring)

    def __post_init__(self):
        sizes, cls, cnt = (_int_vector(n, getattr(self, n)) for n in _DICT_KEYS)
        if sizes.size == 0:
            raise ValueError("allocation sizes are empty; there must be at least one tensor size")
        if sizes[0] <= 0:
            raise ValueError(f"allocation sizes must be positive, got {sizes[0]}")
        if np.any(np.diff(sizes) <= 0):
            raise ValueError("allocation sizes must be strictly increasing (sorted, distinct)")
        if cls.size != sizes.size:
            raise ValueError(f"allocation cls has {cls.size} entries for {sizes.size} sizes")
        problem = self.mapping_problem(cls)
        if problem:
            raise ValueError(f"allocation cls {problem}")
        if cnt.size != cls.max() + 1:
            raise ValueError(f"allocation cnt has {cnt.size} entries for {cls.max() + 1} size classes")
        if np.any(cnt < 1):
            k = int(np.flatnonzero(cnt < 1)[0])
            raise ValueError(f"allocation cnt[{k}] is {cnt[k]}; every size class needs at least 1 object")
        chunk = self.chunk_bytes
        if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 0 or chunk % CHUNK_UNIT:
            raise ValueError(f"allocation chunk_bytes must be 0 or a positive multiple of {CHUNK_UNIT} bytes "
                             f"(a page), not {chunk!r}")
        for name, array in zip(_DICT_KEYS, (sizes, cls, cnt)):
            object.__setattr__(self, name, array)
        object.__setattr__(self, "chunk_bytes", int(chunk))

    @staticmethod
    def mapping_problem(cls: np.ndarray) -> str | None:
        """Why ``cls`` is not a mapping this kind of allocation takes (the paper's restricted CLS
        here; ``unrestricted_classes.UnrestrictedAllocation`` takes any), or None."""
        return cls_problem(cls)

    # --- derived views (cached: the arrays are immutable) ---

    @property
    def num_classes(self) -> int:
        return int(self.cnt.size)

    @cached_property
    def num_objects(self) -> int:
        return int(self.cnt.sum())

    @cached_property
    def class_last_size(self) -> np.ndarray:
        """Index into ``sizes`` of the largest size of each class (the runs' right ends)."""
        return class_last_sizes(self.cls)

    @cached_property
    def class_object_bytes(self) -> np.ndarray:
        """Each class's object size: the largest size mapped to it (unpadded); the chunk."""
        sizes = self.sizes[self.class_last_size]
        if self.chunk_bytes:
            sizes = sizes.copy()
            sizes[-1] = self.chunk_bytes
        return sizes

    @cached_property
    def class_slot_bytes(self) -> np.ndarray:
        """Each class's object size padded to ALIGNMENT: what one object takes in the pool."""
        return aligned_bytes(self.class_object_bytes)

    @cached_property
    def pool_bytes(self) -> int:
        """Bytes of the whole pool: sum over classes of count * padded object size (the chunks
        of a chunked allocation after the other objects rounded up to a whole chunk)."""
        return self._pool_bytes(self.cnt)

    @cached_property
    def min_pool_bytes(self) -> int:
        """Pool bytes with one object per class: the least any count repair can reach."""
        return self._pool_bytes(np.ones_like(self.cnt))

    @property
    def chunks_offset(self) -> int:
        """Where a chunked allocation's chunks start: its other objects, rounded up to a chunk."""
        return self._chunks_offset(self.cnt)

    def _chunks_offset(self, cnt: np.ndarray) -> int:
        small = int(cnt[:-1] @ self.class_slot_bytes[:-1])
        return -(-small // self.chunk_bytes) * self.chunk_bytes

    def _pool_bytes(self, cnt: np.ndarray) -> int:
        if not self.chunk_bytes:
            return int(cnt @ self.class_slot_bytes)
        return self._chunks_offset(cnt) + int(cnt[-1]) * self.chunk_bytes

    def is_valid(self, budget_bytes: int) -> bool:
        """Whether the pool fits in `budget_bytes` (structure is valid by construction)."""
        return self.pool_bytes <= budget_bytes

    def class_of_size(self, size, exact: bool = True):
        """Size class of a byte size (int or int array; returns the same shape).

        exact=True: each size must be one of ``sizes``. exact=False: a size not listed
        goes to the class of the smallest listed size above it (its object still holds it).
        Raises ValueError for a size no class can hold, or an unlisted size when exact.
        """
        query = np.asarray(size, dtype=np.int64)
        index = np.searchsorted(self.sizes, query, side="left")
        too_big = index >= self.sizes.size
        if np.any(too_big):
            bad = int(np.ravel(query)[np.ravel(too_big)][0])
            raise ValueError(f"size {bad} is larger than the largest class object "
                             f"({int(self.sizes[-1])} bytes)")
        if exact:
            missing = self.sizes[index] != query
            if np.any(missing):
                bad = int(np.ravel(query)[np.ravel(missing)][0])
                raise ValueError(f"size {bad} is not one of the allocation's tensor sizes")
        result = self.cls[index]
        return int(result) if result.ndim == 0 else result

    def with_counts(self, cnt) -> Allocation:
        """The same size-class mapping with new counts."""
        return type(self)(self.sizes, self.cls, cnt, self.chunk_bytes)

    # --- value semantics, text, JSON ---

    def __eq__(self, other):
        if not isinstance(other, Allocation):
            return NotImplemented
        return type(self) is type(other) and self.chunk_bytes == other.chunk_bytes and all(
            np.array_equal(getattr(self, n), getattr(other, n)) for n in _DICT_KEYS)

    def __hash__(self):
        return hash((type(self).__name__, self.chunk_bytes, *(getattr(self, n).tobytes() for n in _DICT_KEYS)))

    def __repr__(self):
        chunk = f", chunk_bytes={self.chunk_bytes}" if self.chunk_bytes else ""
        return f"Allocation(sizes={self.sizes.tolist()}, cls={self.cls.tolist()}, cnt={self.cnt.tolist()}{chunk})"

    def __str__(self):
        lines = [f"Allocation: {self.num_classes} size classes, {self.num_objects} objects, "
                 f"pool {format_bytes(self.pool_bytes)}"]
        first = np.concatenate(([0], self.class_last_size[:-1] + 1))
        for k, (lo, hi) in enumerate(zip(first, self.class_last_size)):
            n = hi - lo + 1
            span = (format_bytes(self.sizes[lo]) if n == 1 else
                    f"{format_bytes(self.sizes[lo])} .. {format_bytes(self.sizes[hi])}")
            chunked = " chunks" if self.chunk_bytes and k == self.num_classes - 1 else ""
            lines.append(f"  class {k}: {self.cnt[k]} x {format_bytes(self.class_object_bytes[k])}{chunked}"
                         f"  for {n} size{'s' if n > 1 else ''} ({span})")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """JSON-able {"sizes": [...], "cls": [...], "cnt": [...]} (0-based classes), and
        "chunk_bytes" for a chunked allocation."""
        out = {n: getattr(self, n).tolist() for n in _DICT_KEYS}
        if self.chunk_bytes:
            out["chunk_bytes"] = self.chunk_bytes
        return out

    @classmethod
    def from_dict(cls, data) -> Allocation:
        """Inverse of to_dict. Raises ValueError with one line saying what is wrong."""
        if not isinstance(data, Mapping):
            raise ValueError(f"an allocation must be a mapping with keys {list(_DICT_KEYS)}, "
                             f"got {type(data).__name__}")
        missing = [k for k in _DICT_KEYS if k not in data]
        extra = sorted(str(k) for k in data if k not in (*_DICT_KEYS, "chunk_bytes", "mapping"))
        if missing:
            raise ValueError(f"allocation is missing {', '.join(map(repr, missing))}")
        if extra:
            raise ValueError(f"allocation has unknown keys {', '.join(map(repr, extra))}; "
                             f"expected {list(_DICT_KEYS)}")
        for key in _DICT_KEYS:
            value = data[key]
            if not isinstance(value, (list, tuple)) or not all(
                    isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
                raise ValueError(f"allocation {key!r} must be a list of integers, got {value!r:.80}")
        chunk = data.get("chunk_bytes", 0)
        if isinstance(chunk, bool) or not isinstance(chunk, int):
            raise ValueError(f"allocation 'chunk_bytes' must be an integer, got {chunk!r:.80}")
        mapping = data.get("mapping", "restricted")
        if mapping not in MAPPINGS:
            raise ValueError(f"allocation 'mapping' must be one of {sorted(MAPPINGS)}, got {mapping!r:.80}")
        return (cls if mapping == "restricted" else MAPPINGS[mapping])(*(data[k] for k in _DICT_KEYS), chunk)


# The kinds of size-class mapping by the name to_dict writes ("mapping"; none: restricted).
# allocator.unrestricted_classes adds "unrestricted" (imported by the package, so always there).
MAPPINGS: dict[str, type] = {"restricted": Allocation}


# --- repairs of Sec 5.3 that need no budget ---

def repair_cls(cls) -> np.ndarray:
    """The paper's CLS repair, applied to the steps: change only the steps that are invalid.

    Input: any non-empty integer sequence (e.g. a crossover child). Output: a valid CLS (int64).
    Rule: out[0] = 0 and out[i] = out[i-1] + clip(cls[i] - cls[i-1], 0, 1). A dip is raised
    to a step of 0 and a jump lowered to a step of 1, and everything after a bad step moves
    by the same amount, as the paper's mutation moves "all the elements after the i-th".
    Figure 5: the child [1,2,1,1] (0-based [0,1,0,0]) has one dip, so its 3rd and 4th entries
    each rise by 1, giving [1,2,2,2] (0-based [0,1,1,1]). Keeping the steps keeps the class
    boundaries each child inherited from its parents; a crossover child's only bad step is at
    the crossover point. A valid input is returned unchanged (as a new array).
    """
    values = np.asarray(cls, dtype=np.int64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError("cannot repair cls: it must be a non-empty flat sequence of integers")
    steps = np.clip(np.diff(values), 0, 1)
    return np.concatenate(([0], np.cumsum(steps)))


def extended_counts(alloc: Allocation) -> np.ndarray:
    """CNTEXT: per size, the count of its class (Figure 5: CLS [0,1,1,1], CNT [8,1] -> [8,1,1,1])."""
    return alloc.cnt[alloc.cls]


def counts_from_extended(cls, extended) -> np.ndarray:
    """CNT from a (crossed-over) CNTEXT: the mean of each class's entries, rounded, at least 1.

    Inputs: a valid CLS and one count per size. Rounding is to nearest, halves up (the paper
    does not say; its example averages exactly: CLS [0,1,1,1], CNTEXT [8,1,4,4] -> [8,3]).
    """
    cls = np.asarray(cls, dtype=np.int64)
    extended = np.asarray(extended, dtype=np.int64)
    problem = cls_problem(cls)
    if problem:
        raise ValueError(f"cls {problem}; repair it with repair_cls first")
    if extended.shape != cls.shape:
        raise ValueError(f"extended counts have {extended.size} entries for {cls.size} sizes")
    starts = np.concatenate(([0], np.flatnonzero(np.diff(cls)) + 1))  # classes are runs
    total = np.add.reduceat(extended, starts)
    members = np.diff(np.append(starts, cls.size))
    return np.maximum((2 * total + members) // (2 * members), 1)
