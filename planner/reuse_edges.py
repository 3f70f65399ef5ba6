"""The online policies' reuse edges, compiled: each object's first write waits, per stream, for the
last instruction that used any earlier object (by first write) sharing a physical byte with it.

Without listing every pair of objects that share a byte (quadratic in the objects one stretch of
memory sees over an iteration): objects are visited in first-write order over runs of physical
bytes, each run holding per stream the last instruction that used any object visited so far that
covers it (neighbouring runs with equal holdings merged). Objects first written by one instruction
do not precede each other: a group of them reads the runs before any of them is added.

Compiled (numba) because the online policies make a Program per candidate they tune (lms: 108 per
budget), and in Python this walk was a quarter of lms's planning (NasNet-4: 5.9 of 27 CPU-s)."""
from __future__ import annotations

from itertools import chain

import numba
import numpy as np

from engine.program import Arena

from .first_compile import announced

NO_RUN_YET = -(2**63)


def reuse_edges_by_bytes(arena: Arena, first_write, touch):
    """(instruction, its extra dependencies) for each object's first write that has any, in object
    order: per stream 0-2, the last instruction that used an earlier object sharing its bytes
    (stream order implies the rest). ``first_write``: per object, the instruction that first wrote
    it (-1: none); ``touch``: per object, per stream, the last instruction that used it (-1: none)."""
    ptr, start, size = arena.physical_pieces()
    n = min(len(first_write), len(ptr) - 1)
    first = np.fromiter(first_write[:n], dtype=np.int64, count=n)
    used = np.fromiter(chain.from_iterable(touch[:n]), dtype=np.int64, count=3 * n).reshape(n, 3)
    order = np.argsort(first, kind="stable")
    with announced(_latest_users, "the online policies' reuse edges"):
        extra = _latest_users(ptr.astype(np.int64), start.astype(np.int64), (start + size).astype(np.int64),
                              first, used, order)
    waits = np.flatnonzero((first >= 0) & (extra.max(axis=1, initial=-1) >= 0))
    for at, latest in zip(first[waits].tolist(), extra[waits].tolist()):
        yield at, [d for d in latest if d >= 0]


@numba.njit(cache=True)
def _latest_users(ptr, start, end, first, used, order):
    """Per object (in ``order``, by first write), per stream, the latest use of any object before
    it in that order, first-write group by group, that shares a byte with it; -1 where none."""
    n = first.shape[0]
    extra = np.full((n, 3), -1, dtype=np.int64)
    cap = 64
    runs_at = np.empty(cap, dtype=np.int64)        # run k covers [runs_at[k], runs_at[k + 1])
    held = np.empty((cap, 3), dtype=np.int64)
    runs_at[0] = NO_RUN_YET
    held[0, :] = -1
    m = 1
    g = 0
    while g < n:
        h = g
        while h < n and first[order[h]] == first[order[g]]:
            h += 1
        if first[order[g]] >= 0:
            for i in range(g, h):
                o = order[i]
                for p in range(ptr[o], ptr[o + 1]):
                    if end[p] <= start[p]:
                        continue
                    k = np.searchsorted(runs_at[:m], start[p], side="right") - 1
                    while k < m and runs_at[k] < end[p]:
                        for s in range(3):
                            if held[k, s] > extra[o, s]:
                                extra[o, s] = held[k, s]
                        k += 1
        for i in range(g, h):
            o = order[i]
            for p in range(ptr[o], ptr[o + 1]):
                if end[p] <= start[p]:
                    continue
                if m + 2 > cap:                         # room for the two cuts
                    cap *= 2
                    grown_at = np.empty(cap, dtype=np.int64)
                    grown_at[:m] = runs_at[:m]
                    grown = np.empty((cap, 3), dtype=np.int64)
                    grown[:m] = held[:m]
                    runs_at, held = grown_at, grown
                k, m = _cut(runs_at, held, m, start[p])
                j, m = _cut(runs_at, held, m, end[p])
                for r in range(k, j):
                    for s in range(3):
                        if used[o, s] > held[r, s]:
                            held[r, s] = used[o, s]
                r = j
                lo = max(k, 1)
                while r >= lo:                          # drop a run holding what the one before it holds
                    if r < m and held[r, 0] == held[r - 1, 0] and held[r, 1] == held[r - 1, 1] \
                            and held[r, 2] == held[r - 1, 2]:
                        for x in range(r, m - 1):
                            runs_at[x] = runs_at[x + 1]
                            held[x, 0], held[x, 1], held[x, 2] = held[x + 1, 0], held[x + 1, 1], held[x + 1, 2]
                        m -= 1
                    r -= 1
        g = h
    return extra


@numba.njit(cache=True)
def _cut(runs_at, held, m, at):
    """The index of the run starting at ``at``, made by cutting the run containing it (room for
    one more run is the caller's); and the new run count."""
    k = np.searchsorted(runs_at[:m], at, side="right") - 1
    if runs_at[k] == at:
        return k, m
    for x in range(m, k + 1, -1):
        runs_at[x] = runs_at[x - 1]
        held[x, 0], held[x, 1], held[x, 2] = held[x - 1, 0], held[x - 1, 1], held[x - 1, 2]
    runs_at[k + 1] = at
    held[k + 1, 0], held[k + 1, 1], held[k + 1, 2] = held[k, 0], held[k, 1], held[k, 2]
    return k + 1, m + 1
