"""``bestfit``: the frameworks' default caching allocator, the one paper 001 compares against.

Segments are reserved from the arena; a request takes the smallest cached free block that
holds it (best fit), split when the rest is worth keeping; a freed block is cached (not given
back) and coalesced with free neighbours of its segment; when no cached block fits, a new
segment is reserved; when the capacity is reached, every fully free cached segment is released
and the reservation retried before the request fails (None). Reserved = bytes of segments held;
requested = the live objects' requested bytes. Their gap is the fragmentation 001 Figure 3 shows.

Following PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp):
- sizes rounded up to 512 bytes (kMinBlockSize);
- two pools: small (requests <= 1 MiB) in 2 MiB segments, large in 20 MiB segments for
  requests below 10 MiB, else a segment of the request rounded up to 2 MiB; a block is taken
  only from its own pool;
- a block is split when the rest is >= 512 bytes (small pool) or > 1 MiB (large pool);
  otherwise the whole block is handed out (its excess is internal fragmentation);
- best fit by (size, address); on failure, free cached segments are released and it retries.

A planner that knows the order may ask for ``oldest_within=r``: among cached blocks at most
(1 + r) times the best fit's size, the one freed earliest. A block's last users then finished
longest ago, so a copy into it need not wait for them (PyTorch withholds a block freed with uses
pending on another stream until their events complete, ``record_stream``; a plan made ahead
of time can choose the block instead). None (the default) is PyTorch's choice by (size, address).

Simplified: the arena is one flat range, so a segment needs contiguous free arena bytes (placed
first fit, lowest address); a real cudaMalloc is backed by pages and needs no contiguous
physical range, so the arena's high-water mark can exceed the bytes reserved. Streams, events,
``max_split_size`` and expandable segments are left out. When even a released arena cannot hold
the preferred segment (a budget far below 20 MiB, as in small tests), a segment of the rounded
request is tried last, where PyTorch would report out of memory.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from allocator.online import AllocatorMisuse, OnlineLayout, StatsCounter, register_online

MIN_BLOCK = 512                  # kMinBlockSize: every block a multiple of this
SMALL_SIZE = 1 << 20             # kSmallSize: requests up to this use the small pool
SMALL_SEGMENT = 2 << 20          # kSmallBuffer
LARGE_SEGMENT = 20 << 20         # kLargeBuffer
MIN_LARGE_ALLOC = 10 << 20       # kMinLargeAlloc: below this a large request gets a 20 MiB segment
ROUND_LARGE = 2 << 20            # kRoundLarge


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


@dataclass(eq=False)
class _Block:
    segment: int
    offset: int
    size: int
    small: bool
    obj: int = -1                      # -1: free (cached)
    freed_at: int = 0                  # when it was last freed (the allocator's free count; 0: never used)
    prev: "_Block | None" = None       # neighbours within the segment
    next: "_Block | None" = None


class BestFitAllocator:
    name = "bestfit"

    def __init__(self, capacity_bytes: int, keep_history: bool = False, oldest_within: float | None = None):
        if capacity_bytes < 0:
            raise AllocatorMisuse(f"capacity must be >= 0 bytes, not {capacity_bytes}")
        if oldest_within is not None and not oldest_within >= 0:
            raise AllocatorMisuse(f"oldest_within must be >= 0 (a share of the best fit's size), not {oldest_within}")
        self.capacity_bytes = int(capacity_bytes)
        self.oldest_within = oldest_within
        self._frees = 0
        self._free = {True: [], False: []}       # pool (small?) -> sorted [(size, offset, block id)]
        self._block_of_key: dict[tuple, _Block] = {}
        self._segments: dict[int, tuple[int, int]] = {}   # segment id -> (offset, size)
        self._segment_first: dict[int, _Block] = {}
        # Segments that are one cached free block (segment id -> that block): what a release gives
        # back, kept as blocks are cached and taken (a cached block's neighbours never change)
        # so that a failed request does not walk every segment.
        self._whole_free: dict[int, _Block] = {}
        self._holes = [(0, self.capacity_bytes)] if self.capacity_bytes else []   # arena not in a segment
        # The holes' lengths, sorted: a request longer than the longest fails without walking the
        # holes (most do: an online policy asks again after each copy it waits for, and each
        # failed request tries three segments; NasNet-16's window search, 330,000 of 360,000).
        self._hole_lengths = [length for _, length in self._holes]
        self._next_segment = 0
        self._live: dict[int, tuple[_Block, int]] = {}   # object -> (its block, requested bytes)
        self._offsets: list[int] = []
        self._bytes: list[int] = []
        self._high_water = 0
        self.counter = StatsCounter(keep_history=keep_history)

    # ------------------------------------------------------------------ protocol
    def alloc(self, nbytes: int) -> int | None:
        if nbytes < 0:
            raise AllocatorMisuse(f"cannot allocate {nbytes} bytes")
        size = max(MIN_BLOCK, _round_up(int(nbytes), MIN_BLOCK))
        small = size <= SMALL_SIZE
        block = self._best_fit(size, small)
        if block is None:
            block = self._new_segment(size, small)
            if block is None:
                return None
        self._take(block)
        rest = block.size - size
        if (rest >= MIN_BLOCK) if small else (rest > SMALL_SIZE):
            tail = _Block(block.segment, block.offset + size, rest, small, -1, block.freed_at, block, block.next)
            if block.next is not None:
                block.next.prev = tail
            block.next, block.size = tail, size
            self._cache(tail)
        obj = len(self._offsets)
        block.obj = obj
        self._offsets.append(block.offset)
        self._bytes.append(block.size)
        self._live[obj] = (block, int(nbytes))
        self.counter.change(requested=int(nbytes))
        return obj

    def free(self, obj: int) -> None:
        entry = self._live.pop(obj, None)
        if entry is None:
            raise AllocatorMisuse(f"object {obj} is not live (never allocated, or freed already)")
        block, nbytes = entry
        block.obj = -1
        self._frees += 1
        block.freed_at = self._frees
        for neighbour in (block.prev, block.next):
            if neighbour is not None and neighbour.obj == -1:
                self._take(neighbour)
                block = self._merge(block, neighbour)
        self._cache(block)
        self.counter.change(requested=-nbytes)

    def layout(self) -> OnlineLayout:
        description = {"name": self.name, "capacity_bytes": self.capacity_bytes, "min_block": MIN_BLOCK,
                       "small_size": SMALL_SIZE, "small_segment": SMALL_SEGMENT, "large_segment": LARGE_SEGMENT}
        if self.oldest_within is not None:
            description["oldest_within"] = self.oldest_within
        return OnlineLayout(np.asarray(self._offsets, dtype=np.int64), np.asarray(self._bytes, dtype=np.int64),
                            self._high_water, description)

    def stats(self):
        return self.counter.snapshot()

    # ------------------------------------------------------------------ cached blocks
    def _cache(self, block: _Block) -> None:
        key = (block.size, block.offset, id(block))
        bisect.insort(self._free[block.small], key)
        self._block_of_key[key] = block
        if block.prev is None and block.next is None:
            self._whole_free[block.segment] = block

    def _take(self, block: _Block) -> None:
        key = (block.size, block.offset, id(block))
        pool = self._free[block.small]
        del pool[bisect.bisect_left(pool, key)]
        del self._block_of_key[key]
        if block.prev is None and block.next is None:
            del self._whole_free[block.segment]

    def _best_fit(self, size: int, small: bool) -> _Block | None:
        pool = self._free[small]
        i = bisect.bisect_left(pool, (size, -1, -1))
        if i >= len(pool):
            return None
        if self.oldest_within is None:
            return self._block_of_key[pool[i]]
        most = pool[i][0] * (1 + self.oldest_within)
        j = bisect.bisect_right(pool, (most, float("inf"), float("inf")), lo=i)
        return min((self._block_of_key[key] for key in pool[i:j]), key=lambda b: (b.freed_at, b.size, b.offset))

    @staticmethod
    def _merge(a: _Block, b: _Block) -> _Block:
        first, second = (a, b) if a.offset < b.offset else (b, a)
        first.size += second.size
        first.freed_at = max(first.freed_at, second.freed_at)   # as recent as its most recent part
        first.next = second.next
        if second.next is not None:
            second.next.prev = first
        return first

    # ------------------------------------------------------------------ segments
    def _new_segment(self, size: int, small: bool) -> _Block | None:
        if small:
            preferred = SMALL_SEGMENT
        elif size < MIN_LARGE_ALLOC:
            preferred = LARGE_SEGMENT
        else:
            preferred = _round_up(size, ROUND_LARGE)
        for seg_size, release_first in ((preferred, False), (preferred, True), (size, True)):
            if release_first:
                self._release_cached_segments()
            block = self._reserve(seg_size, small)
            if block is not None:
                return block
        return None

    def _reserve(self, seg_size: int, small: bool) -> _Block | None:
        """A free block spanning a new segment of ``seg_size`` at the lowest arena hole that fits."""
        if not self._hole_lengths or self._hole_lengths[-1] < seg_size:
            return None
        for i, (start, length) in enumerate(self._holes):
            if length >= seg_size:
                self._forget_length(length)
                if length == seg_size:
                    del self._holes[i]
                else:
                    self._holes[i] = (start + seg_size, length - seg_size)
                    bisect.insort(self._hole_lengths, length - seg_size)
                seg = self._next_segment
                self._next_segment += 1
                self._segments[seg] = (start, seg_size)
                block = _Block(seg, start, seg_size, small)
                self._segment_first[seg] = block
                self._cache(block)
                self._high_water = max(self._high_water, start + seg_size)
                self.counter.change(reserved=seg_size)
                return block
        return None

    def _release_cached_segments(self) -> None:
        """Give back every segment that is one free block (PyTorch's release_cached_blocks), in
        the order the segments were made."""
        for seg in sorted(self._whole_free):
            block = self._whole_free[seg]
            self._take(block)
            start, seg_size = self._segments.pop(seg)
            del self._segment_first[seg]
            self._give_hole(start, seg_size)
            self.counter.change(reserved=-seg_size)

    def _give_hole(self, start: int, length: int) -> None:
        holes = self._holes
        i = bisect.bisect_left(holes, (start, 0))
        holes.insert(i, (start, length))
        if i + 1 < len(holes) and start + length == holes[i + 1][0]:   # join the hole after
            self._forget_length(holes[i + 1][1])
            holes[i] = (start, length + holes[i + 1][1])
            del holes[i + 1]
        if i > 0 and holes[i - 1][0] + holes[i - 1][1] == start:        # and the hole before
            self._forget_length(holes[i - 1][1])
            holes[i - 1] = (holes[i - 1][0], holes[i - 1][1] + holes[i][1])
            del holes[i]
            i -= 1
        bisect.insort(self._hole_lengths, holes[i][1])

    def _forget_length(self, length: int) -> None:
        del self._hole_lengths[bisect.bisect_left(self._hole_lengths, length)]


register_online("bestfit", BestFitAllocator,
                "best fit with caching, splitting and coalescing (PyTorch's / TensorFlow's default)")
