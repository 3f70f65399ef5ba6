"""``va``: virtual addressing over fixed-size physical chunks (paper 001, Section 4).

Physical memory is a row of chunks of ``chunk_bytes``. A request of m bytes takes
k = ceil(m / chunk) free chunks, which need not be adjacent, and maps them in turn into a
fresh contiguous virtual range of k chunks: a tensor sees one contiguous array while its bytes
live wherever chunks were free. A freed object's chunks go back to the free list and serve any
later size, so there is no external fragmentation; internal fragmentation is below one chunk per
live object (001 Eq. 1). Free chunks are taken lowest first, and chunks once touched stay held
(a cache of physical chunks: 001 releases the virtual range, not the memory), so ``reserved`` is
the chunks ever touched and the arena's physical bytes are that count times ``chunk_bytes``.

Small requests (up to ``small_bytes``, default 1 MiB, as PyTorch's small pool) would waste most
of a chunk each (a 1 KiB batch-norm scale in a 20 MiB chunk), so they share chunks: a chunk
mapped once is cut into equal slots of a power of two (>= 4 KiB, a page, the smallest piece any
backend can address separately); the chunk returns to the free list when its last slot is freed.
Their internal fragmentation is below one slot each (under 2x of a small request).

What a Program receives (``OnlineLayout``): objects as VIRTUAL ranges (``object_offset``,
``object_bytes``) and the page table that backs them, ``mappings`` rows (virtual offset, physical
offset, bytes), each a whole chunk. The verifier translates an object's range through the table
into physical extents (two live tensors in one physical chunk conflict even when their virtual
ranges differ); backends map the rows (engine/backends: a memfd on cpu, cuMemMap on cuda). Virtual
ranges are never reused, so a static plan can map every row once before it runs.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from allocator import registry
from engine.units import format_bytes
from allocator.online import AllocatorMisuse, OnlineLayout, StatsCounter
from allocator.registry import CHUNKED, ONLINE

DEFAULT_CHUNK_BYTES = 20 << 20     # nnabla's and PyTorch's default chunk; 001 used 40 MB
PAGE = 4096                         # the finest granularity a backend maps (CUDA's is 2 MiB)
DEFAULT_SMALL_BYTES = 1 << 20
# Without a chunk size given, a pool gets at least this many chunks (``chunk_for_pool``).
CHUNKS_PER_POOL = 16


def chunk_for_pool(capacity_bytes: int) -> int:
    """The chunk a pool of ``capacity_bytes`` gets when none is given: the largest power of two
    (a page at least) that is at most 1/CHUNKS_PER_POOL of the pool, never above the default.
    001 used one fixed chunk on 16-32 GB GPUs; a fixed 20 MiB chunk is larger than a small
    model's whole pool, and a tensor's rounding to whole chunks then wastes at most about a
    sixteenth of the pool. Pools of 320 MiB and more keep the default."""
    chunk = PAGE
    while chunk * 2 <= int(capacity_bytes) // CHUNKS_PER_POOL:
        chunk *= 2
    return min(chunk, DEFAULT_CHUNK_BYTES)


@dataclass
class _Slab:
    """A chunk cut into equal slots for small requests, mapped once at ``virtual``."""
    virtual: int
    free_slots: list[int]           # popped from the end: lowest slot first
    used: int = 0


@dataclass(frozen=True)
class _Placed:
    """What a live object holds: whole chunks, or one slot of a slab."""
    nbytes: int                     # requested
    chunks: tuple[int, ...] = ()
    slot: tuple[int, int, int] | None = None     # (slot size, chunk, slot index)


class VirtualChunkAllocator:
    name = "va"

    def __init__(self, capacity_bytes: int, chunk_bytes: int | None = None,
                 small_bytes: int | None = None, keep_history: bool = False):
        """``chunk_bytes``: None for ``chunk_for_pool(capacity_bytes)``; a chunk larger than the
        pool is refused in one line. ``small_bytes``: requests up to it share chunks (None: 1 MiB,
        or half a chunk if less)."""
        chunk_bytes = chunk_for_pool(capacity_bytes) if chunk_bytes is None else int(chunk_bytes)
        small_bytes = min(DEFAULT_SMALL_BYTES, chunk_bytes // 2) if small_bytes is None else int(small_bytes)
        if chunk_bytes <= 0 or chunk_bytes % PAGE:
            raise AllocatorMisuse(f"the chunk size must be a positive multiple of {PAGE} bytes (a page), "
                                  f"not {chunk_bytes}")
        if chunk_bytes > capacity_bytes >= PAGE:
            fits = int(capacity_bytes) // PAGE * PAGE
            raise AllocatorMisuse(f"a chunk of {format_bytes(chunk_bytes)} is larger than the whole pool of "
                                  f"{format_bytes(capacity_bytes)}; give a chunk of at most {format_bytes(fits)} "
                                  f"(--chunk-mib {fits / 2**20:.4g}), or leave it out to have one chosen")
        if not 0 <= small_bytes <= chunk_bytes // 2:
            raise AllocatorMisuse(f"small_bytes must be between 0 and half a chunk ({chunk_bytes // 2}), "
                                  f"not {small_bytes}")
        self.capacity_bytes = int(capacity_bytes)
        self.chunk_bytes, self.small_bytes = chunk_bytes, small_bytes
        self.num_chunks = max(0, self.capacity_bytes) // chunk_bytes
        self._free_chunks: list[int] = []          # heap of chunks touched before and free now
        self._touched = 0                          # chunks 0 .. _touched-1 have been used
        self._virtual_end = 0
        self._mappings: list[tuple[int, int, int]] = []     # (virtual, physical, bytes)
        self._offsets: list[int] = []
        self._bytes: list[int] = []
        self._live: dict[int, _Placed] = {}
        self._slabs: dict[int, dict[int, _Slab]] = {}       # slot size -> {chunk: its slab}
        self.counter = StatsCounter(keep_history=keep_history)

    # ------------------------------------------------------------------ protocol
    def alloc(self, nbytes: int) -> int | None:
        if nbytes < 0:
            raise AllocatorMisuse(f"cannot allocate {nbytes} bytes")
        nbytes = int(nbytes)
        obj = self._alloc_small(nbytes) if nbytes <= self.small_bytes else self._alloc_chunks(nbytes)
        if obj is not None:
            self.counter.change(requested=nbytes)
        return obj

    def free(self, obj: int) -> None:
        entry = self._live.pop(obj, None)
        if entry is None:
            raise AllocatorMisuse(f"object {obj} is not live (never allocated, or freed already)")
        for c in entry.chunks:
            heapq.heappush(self._free_chunks, c)
        if entry.slot is not None:
            slot_size, chunk, slot = entry.slot
            slab = self._slabs[slot_size][chunk]
            slab.free_slots.append(slot)
            slab.used -= 1
            if slab.used == 0:              # its last slot: the chunk serves any size again
                del self._slabs[slot_size][chunk]
                heapq.heappush(self._free_chunks, chunk)
        self.counter.change(requested=-entry.nbytes)

    def layout(self) -> OnlineLayout:
        return OnlineLayout(np.asarray(self._offsets, dtype=np.int64), np.asarray(self._bytes, dtype=np.int64),
                            self._touched * self.chunk_bytes,
                            {"name": self.name, "chunk_bytes": self.chunk_bytes, "small_bytes": self.small_bytes,
                             "capacity_bytes": self.capacity_bytes},
                            mappings=np.asarray(self._mappings, dtype=np.int64).reshape(-1, 3),
                            virtual_bytes=self._virtual_end)

    def stats(self):
        return self.counter.snapshot()

    # ------------------------------------------------------------------ chunks
    def _free_count(self) -> int:
        return len(self._free_chunks) + self.num_chunks - self._touched

    def _take_chunks(self, k: int) -> list[int]:
        """k free chunks, lowest first (cached ones before untouched ones); the caller checked there are k."""
        taken = [heapq.heappop(self._free_chunks) for _ in range(min(k, len(self._free_chunks)))]
        fresh = k - len(taken)
        taken += range(self._touched, self._touched + fresh)
        if fresh:
            self._touched += fresh
            self.counter.change(reserved=fresh * self.chunk_bytes)
        return taken

    def _map(self, chunks: list[int]) -> int:
        """Map ``chunks`` in turn into a fresh virtual range; its start."""
        base, cb = self._virtual_end, self.chunk_bytes
        for i, c in enumerate(chunks):
            v, p = base + i * cb, c * cb
            last = self._mappings[-1] if self._mappings else None
            if i and last[0] + last[2] == v and last[1] + last[2] == p:    # physically next: one row
                self._mappings[-1] = (last[0], last[1], last[2] + cb)
            else:
                self._mappings.append((v, p, cb))
        self._virtual_end = base + len(chunks) * cb
        return base

    def _new_object(self, offset: int, size: int, placed: _Placed) -> int:
        obj = len(self._offsets)
        self._offsets.append(offset)
        self._bytes.append(size)
        self._live[obj] = placed
        return obj

    def _alloc_chunks(self, nbytes: int) -> int | None:
        k = -(-nbytes // self.chunk_bytes)
        if k > self._free_count():
            return None
        chunks = self._take_chunks(k)
        base = self._map(chunks)
        return self._new_object(base, k * self.chunk_bytes, _Placed(nbytes, chunks=tuple(chunks)))

    def _alloc_small(self, nbytes: int) -> int | None:
        slot_size = max(PAGE, 1 << max(0, nbytes - 1).bit_length())
        slabs = self._slabs.setdefault(slot_size, {})
        chunk = next((c for c, slab in slabs.items() if slab.free_slots), None)
        if chunk is None:
            if self._free_count() == 0:
                return None
            chunk = self._take_chunks(1)[0]
            slots = self.chunk_bytes // slot_size
            slabs[chunk] = _Slab(self._map([chunk]), list(range(slots - 1, -1, -1)))
        slab = slabs[chunk]
        slot = slab.free_slots.pop()
        slab.used += 1
        return self._new_object(slab.virtual + slot * slot_size, slot_size,
                                _Placed(nbytes, slot=(slot_size, chunk, slot)))


# One name, two kinds: to an online policy the allocator above; to a size-class policy the chunk
# class of a chunked allocation (allocator.Allocation.chunk_bytes), chunks as big as this one's.
registry.register(registry.Allocator(
    "va", (ONLINE, CHUNKED), "virtual addressing: fixed-size physical chunks mapped into contiguous virtual "
    "ranges (001 Sec. 4); to a size-class policy, a last class of chunks a tensor takes as many of as it needs",
    factory=VirtualChunkAllocator))
