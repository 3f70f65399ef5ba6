"""The size-class allocator's layout: an allocation's objects placed at byte offsets in one arena.

This is one allocator among others: what it hands a Program is a table of objects (byte
offset, byte size) in the arena (``object_offset``, ``object_bytes``, ``arena_bytes``) and a
JSON description of itself (``describe``). Planners that place tensors in interchangeable
objects (the Belady and LRU swap planners) also read its groups: a tensor of a given size
may live in any object of its size class (``class_of_sizes``, ``objects_of_class``).

Objects are numbered class by class (class 0's objects first), so the objects of class k
are the contiguous ids ``class_first_object[k] : class_first_object[k + 1]``. Each object
owns ``object_bytes`` = its class's object size padded to ALIGNMENT, and objects tile the
arena back to back, so every offset is a multiple of ALIGNMENT, no two objects overlap, and
``arena_bytes == alloc.pool_bytes``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from allocator.size_classes import Allocation


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array, dtype=np.int64)
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class SizeClassLayout:
    """Dense per-object arrays (int64, read-only), indexed by object id.

    object_class[i]: the size class of object i.
    object_offset[i]: its byte offset in the arena (a multiple of ALIGNMENT).
    object_bytes[i]: the bytes it owns (its class's object size, padded to ALIGNMENT).
    class_first_object[k]: the first object id of class k; length num_classes + 1.
    arena_bytes: the arena's size, the sum of object_bytes.
    """

    object_class: np.ndarray
    object_offset: np.ndarray
    object_bytes: np.ndarray
    class_first_object: np.ndarray
    arena_bytes: int

    allocation: Allocation

    @classmethod
    def from_allocation(cls, alloc: Allocation) -> SizeClassLayout:
        """Lay out `alloc`'s objects, class by class, back to back from offset 0."""
        object_class = np.repeat(np.arange(alloc.num_classes, dtype=np.int64), alloc.cnt)
        object_bytes = alloc.class_slot_bytes[object_class]
        ends = np.cumsum(object_bytes)
        if alloc.chunk_bytes:       # the chunks start on a chunk boundary
            chunks = object_class == alloc.num_classes - 1
            ends[chunks] += alloc.chunks_offset - (ends[chunks][0] - object_bytes[chunks][0])
        return cls(object_class=_frozen(object_class),
                   object_offset=_frozen(ends - object_bytes),
                   object_bytes=_frozen(object_bytes),
                   class_first_object=_frozen(np.concatenate(([0], np.cumsum(alloc.cnt)))),
                   arena_bytes=int(ends[-1]), allocation=alloc)

    @property
    def num_objects(self) -> int:
        return int(self.object_class.size)

    @property
    def num_classes(self) -> int:
        return int(self.class_first_object.size - 1)

    def objects_of_class(self, k: int) -> range:
        """The object ids of size class k."""
        return range(int(self.class_first_object[k]), int(self.class_first_object[k + 1]))

    def class_of_sizes(self, nbytes: np.ndarray) -> np.ndarray:
        """The size class of each byte size; ValueError naming a size the allocation lacks."""
        sizes = self.allocation.sizes
        idx = np.minimum(np.searchsorted(sizes, nbytes), len(sizes) - 1)
        missing = sizes[idx] != nbytes
        if np.any(missing):
            raise ValueError(f"the allocation has no size class for tensors of "
                             f"{int(np.asarray(nbytes)[missing][0])} bytes")
        return self.allocation.cls[idx]

    def describe(self) -> dict:
        """What a Program records of the allocator that carved its arena (JSON)."""
        return {"name": "size_classes", **self.allocation.to_dict()}


@dataclass(frozen=True, eq=False)
class PlacedLayout:
    """A chunked allocation's layout with the placements a plan made in its chunk class, as the
    objects of a virtual-addressing arena (what ``engine.program.Arena.of`` reads).

    Objects 0 .. n-1 are the layout's own, at their offsets, which the page table maps one to
    one (virtual = physical over the whole pool); object n + j is placement j: a virtual range
    past the pool onto its chunks ``chunks[ptr[j]:ptr[j + 1]]`` in turn, one tensor's stay in
    the chunks it was given (a tensor larger than a chunk sees one contiguous array)."""
    base: SizeClassLayout
    ptr: np.ndarray
    chunks: np.ndarray          # object ids of the base layout's chunk class

    def __post_init__(self):
        chunk = self.base.allocation.chunk_bytes
        width = np.diff(self.ptr).astype(np.int64)
        # placement j starts past the pool after the chunks of placements 0 .. j-1 (an exclusive
        # prefix sum: one start per placement, none when the plan placed nothing in the chunk class)
        starts = self.base.arena_bytes + chunk * (np.cumsum(width) - width)
        object.__setattr__(self, "object_offset", _frozen(np.concatenate((self.base.object_offset, starts))))
        object.__setattr__(self, "object_bytes", _frozen(np.concatenate((self.base.object_bytes, width * chunk))))
        object.__setattr__(self, "virtual_bytes", int(self.base.arena_bytes + chunk * int(width.sum())))

    @cached_property
    def mappings(self) -> np.ndarray:
        """Rows (virtual, physical, bytes): the pool one to one, then each placement's chunks,
        a run of chunks next to each other both virtually and physically as one row. Made when
        first asked (a Program's arena), not for every candidate the search only times."""
        # Placements lie back to back past the pool, so chunk i of ``chunks`` is virtually at
        # arena_bytes + i * chunk, and a run ends only where the physical chunks stop following.
        chunk = self.base.allocation.chunk_bytes
        phys = self.base.object_offset[self.chunks]
        run_starts = np.ones(phys.size, dtype=bool)
        run_starts[1:] = np.diff(phys) != chunk
        starts = np.flatnonzero(run_starts)
        run_bytes = chunk * np.diff(np.append(starts, phys.size))
        rows = np.stack((self.base.arena_bytes + chunk * starts, phys[starts], run_bytes), axis=1)
        if self.base.arena_bytes:
            rows = np.concatenate(([[0, 0, self.base.arena_bytes]], rows))
        return _frozen(rows.reshape(-1, 3))

    @property
    def arena_bytes(self) -> int:
        return self.base.arena_bytes

    def describe(self) -> dict:
        return {**self.base.describe(), "name": "size_classes_on_chunks", "placements": int(self.ptr.size - 1)}
