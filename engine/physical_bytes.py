"""Which object last wrote each PHYSICAL byte of an arena, kept as runs, and whether two
objects share a byte: what the verifier needs about shared bytes in time linear in the
instructions (``engine.program.sharing_objects`` lists every pair of objects that ever share a
byte, which under virtual addressing is quadratic in the placements one chunk sees).

Runs: the physical address space cut into intervals, each owned by the object whose write (or
initial residence) last covered it, -1 for bytes nobody has written. The space is cut into
buckets of a power of two of bytes, about an object's typical piece (a chunked arena's chunk): a
bucket a write covers whole has one owner, kept as one number; only a bucket written in part
keeps its own short list of runs. A write costs O(buckets its pieces meet) plus the runs it
removes in part-written buckets, each made once; one sorted list over the whole space, as before,
cost a shift of the list per cut (rnn-8-8k on va: 13,000 chunks, 275,000 cuts). An arena whose
objects never share a byte (a size-class pool: one piece each, apart) needs no runs: an object's
bytes were last written by itself, if by anyone."""
from __future__ import annotations

from bisect import bisect_left, bisect_right

import numpy as np

from .program import Arena

NOBODY = -1
SPLIT = -2          # a bucket's owner where its bytes have several: its runs say


class PhysicalBytes:
    def __init__(self, arena: Arena, bucket_bytes: int | None = None):
        """``bucket_bytes``: a power of two, or None to choose one from the pieces (``_bucket_bytes``)."""
        ptr, start, size = arena.physical_pieces()
        keep = size > 0                             # an empty piece holds no byte
        owner = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))[keep]
        start, size = start[keep], size[keep]
        order = np.lexsort((start, owner))
        start, end = start[order].tolist(), (start + size)[order].tolist()
        bounds = np.searchsorted(owner[order], np.arange(len(ptr))).tolist()
        # per object, its pieces by physical offset: disjoint (the page table is checked), so the
        # ends are in order too
        self._starts = [start[a:b] for a, b in zip(bounds, bounds[1:])]
        self._ends = [end[a:b] for a, b in zip(bounds, bounds[1:])]
        pieces = np.diff(bounds)
        by_start = np.argsort(start, kind="stable")
        self._apart = bool(np.all(pieces <= 1)) and bool(np.all(
            np.asarray(end)[by_start][:-1] <= np.asarray(start)[by_start][1:]))
        self._written = np.zeros(len(ptr) - 1, dtype=bool)     # apart: whether the object has written
        top = max(end, default=0)                   # the end of the highest piece
        self._bucket_bytes = bucket_bytes or _bucket_bytes(size, top)
        # per bucket, the owner of all its bytes, or SPLIT: its runs are in _split
        self._whole: list[int] = [NOBODY] * (top // self._bucket_bytes + 1)
        self._split: dict[int, tuple[list[int], list[int]]] = {}   # bucket: its runs' starts and owners

    # ------------------------------------------------------------------ pairs
    def shares(self, a: int, b: int) -> bool:
        """Whether objects ``a`` and ``b`` (a != b) have a physical byte in common."""
        if self._apart:
            return False
        if len(self._starts[a]) > len(self._starts[b]):
            a, b = b, a
        starts, ends = self._starts[b], self._ends[b]
        for s, e in zip(self._starts[a], self._ends[a]):
            j = bisect_left(starts, e) - 1          # the last piece of b starting before this one ends
            if j >= 0 and ends[j] > s:
                return True
        return False

    def sharing(self, o: int) -> list[int]:
        """Every other object sharing a byte with ``o``, in id order (for the message of a failure)."""
        if self._apart:
            return []
        return [x for x in range(len(self._starts)) if x != o and self.shares(o, x)]

    # ------------------------------------------------------------------ runs
    def owners(self, o: int) -> set[int]:
        """The objects whose writes last covered some byte of ``o`` (``NOBODY`` left out)."""
        if self._apart:
            return {o} if self._written[o] else set()
        return self._walk(o, None)

    def take(self, o: int) -> set[int]:
        """``o`` has written all its bytes: its pieces become runs it owns. Returns the objects
        that owned some of those bytes before (``NOBODY`` left out)."""
        if self._apart:
            before = {o} if self._written[o] else set()
            self._written[o] = len(self._starts[o]) > 0
            return before
        return self._walk(o, o)

    def _walk(self, o: int, writer: int | None) -> set[int]:
        """The owners of ``o``'s bytes; with ``writer``, those bytes become its."""
        size, whole, split = self._bucket_bytes, self._whole, self._split
        found: set[int] = set()
        for s, e in zip(self._starts[o], self._ends[o]):
            b0, b1 = -(-s // size), e // size         # the buckets [s, e) covers whole: b0 .. b1 - 1
            if s < b0 * size:                         # the part before them (the whole piece if b0 > b1)
                self._part(b0 - 1, s, min(e, b0 * size), writer, found)
            if b0 < b1:
                seg = whole[b0:b1]
                if SPLIT in seg:
                    for b in range(b0, b1):
                        if whole[b] == SPLIT:
                            found.update(split.pop(b)[1] if writer is not None else split[b][1])
                found.update(seg)
                if writer is not None:
                    whole[b0:b1] = [writer] * (b1 - b0)
            if b0 <= b1 and e > b1 * size:            # the part after them
                self._part(b1, b1 * size, e, writer, found)
        found.discard(NOBODY)
        found.discard(SPLIT)
        return found

    def _part(self, b: int, lo: int, hi: int, writer: int | None, found: set[int]) -> None:
        """Bytes [lo, hi) of bucket ``b``, less than all of it: their owners into ``found``; with
        ``writer``, they become its (the bucket keeps runs from then on)."""
        runs = self._split.get(b)
        if runs is None:
            if writer is None:
                found.add(self._whole[b])
                return
            runs = self._split[b] = ([b * self._bucket_bytes], [self._whole[b]])
            self._whole[b] = SPLIT
        starts, owner = runs
        if writer is not None:
            _replace_runs(starts, owner, lo, hi, (b + 1) * self._bucket_bytes, writer, found)
            return
        k = bisect_right(starts, lo) - 1
        while k < len(starts) and starts[k] < hi:
            found.add(owner[k])
            k += 1


def _replace_runs(starts: list[int], owner: list[int], s: int, e: int, bucket_end: int, o: int,
                  found: set[int]) -> None:
    """Bytes [s, e) of one bucket's runs (``starts[0]`` its first byte, [s, e) within it) become one
    run owned by ``o``; the owners they had are added to ``found``."""
    k = bisect_right(starts, s) - 1             # the run holding byte s
    if starts[k] != s:                          # cut it at s
        k += 1
        starts.insert(k, s)
        owner.insert(k, owner[k - 1])
    j = k + 1                                   # runs k .. j - 1 meet [s, e)
    while j < len(starts) and starts[j] < e:
        j += 1
    found.update(owner[k:j])
    if e < bucket_end and (j == len(starts) or starts[j] != e):    # run j - 1 goes on past e: cut it there
        starts.insert(j, e)
        owner.insert(j, owner[j - 1])
    del starts[k + 1:j], owner[k + 1:j]
    owner[k] = o


def _bucket_bytes(size: np.ndarray, top: int) -> int:
    """The least power of two at least the median piece (a chunked arena's chunk: a write then
    meets about as many buckets as it has pieces) and at least the space up to ``top`` over four
    times the pieces (the table of buckets then holds at most four a piece)."""
    if not len(size):
        return 1
    wanted = max(int(np.median(size)), -(-top // (4 * len(size))), 1)
    return 1 << (wanted - 1).bit_length()
