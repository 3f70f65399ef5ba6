"""Which object last wrote each PHYSICAL byte of an arena, kept as runs, and whether two
objects share a byte: what the verifier needs about shared bytes in time linear in the
instructions (``engine.program.sharing_objects`` lists every pair of objects that ever share a
byte, which under virtual addressing is quadratic in the placements one chunk sees).

Runs: the physical address space cut into intervals, each owned by the object whose write (or
initial residence) last covered it, -1 for bytes nobody has written. A write replaces the runs
under each of the object's pieces by one run, so the runs it meets were made by earlier writes:
a write costs O(pieces log runs) plus the runs it removes, each made once. An arena whose objects
never share a byte (a size-class pool: one piece each, apart) needs no runs: an object's bytes
were last written by itself, if by anyone."""
from __future__ import annotations

from bisect import bisect_left, bisect_right

import numpy as np

from .program import Arena

NOBODY = -1


class PhysicalBytes:
    def __init__(self, arena: Arena):
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
        self._run_start: list[int] = [-2**63]     # run k covers [start[k], start[k + 1]); the last, the rest
        self._run_owner: list[int] = [NOBODY]
        pieces = np.diff(bounds)
        by_start = np.argsort(start, kind="stable")
        self._apart = bool(np.all(pieces <= 1)) and bool(np.all(
            np.asarray(end)[by_start][:-1] <= np.asarray(start)[by_start][1:]))
        self._written = np.zeros(len(ptr) - 1, dtype=bool)     # apart: whether the object has written

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
        found: set[int] = set()
        starts, owner = self._run_start, self._run_owner
        for s, e in zip(self._starts[o], self._ends[o]):
            k = bisect_right(starts, s) - 1
            while k < len(starts) and starts[k] < e:
                found.add(owner[k])
                k += 1
        found.discard(NOBODY)
        return found

    def take(self, o: int) -> set[int]:
        """``o`` has written all its bytes: its pieces become runs it owns. Returns the objects
        that owned some of those bytes before (``NOBODY`` left out)."""
        if self._apart:
            before = {o} if self._written[o] else set()
            self._written[o] = len(self._starts[o]) > 0
            return before
        found: set[int] = set()
        starts, owner = self._run_start, self._run_owner
        for s, e in zip(self._starts[o], self._ends[o]):
            k = bisect_right(starts, s) - 1         # the run holding byte s
            if starts[k] != s:                      # cut it at s
                k += 1
                starts.insert(k, s)
                owner.insert(k, owner[k - 1])
            j = k + 1                               # runs k .. j - 1 meet [s, e)
            while j < len(starts) and starts[j] < e:
                j += 1
            found.update(owner[k:j])
            if j == len(starts) or starts[j] != e:  # the run j - 1 goes on past e: cut it there
                starts.insert(j, e)
                owner.insert(j, owner[j - 1])
            del starts[k + 1:j], owner[k + 1:j]
            owner[k] = o
        found.discard(NOBODY)
        return found
