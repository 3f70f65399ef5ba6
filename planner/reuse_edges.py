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
    runs_at = np.empty(64, dtype=np.int64)         # run k covers [runs_at[k], runs_at[k + 1])
    held = np.empty((64, 3), dtype=np.int64)       # per run, per stream, the latest use of its bytes
    runs_at[0] = NO_RUN_YET
    held[0, :] = -1
    m = 1
    g = 0
    while g < n:                                   # objects g .. h - 1: one first write
        h = g
        while h < n and first[order[h]] == first[order[g]]:
            h += 1
        if first[order[g]] >= 0:
            for i in range(g, h):
                o = order[i]
                for p in range(ptr[o], ptr[o + 1]):
                    if end[p] > start[p]:
                        _read(runs_at, held, m, start[p], end[p], extra[o])
        for i in range(g, h):
            o = order[i]
            for p in range(ptr[o], ptr[o + 1]):
                if end[p] > start[p]:
                    if m + 2 > runs_at.shape[0]:       # room for the two cuts
                        runs_at, held = _grown(runs_at, held, m)
                    m = _hold(runs_at, held, m, start[p], end[p], used[o])
        g = h
    return extra


@numba.njit(cache=True)
def _read(runs_at, held, m, s, e, latest):
    """``latest`` (per stream) raised to what the runs over [s, e) hold."""
    k = np.searchsorted(runs_at[:m], s, side="right") - 1
    while k < m and runs_at[k] < e:
        for stream in range(3):
            latest[stream] = max(latest[stream], held[k, stream])
        k += 1


@numba.njit(cache=True)
def _hold(runs_at, held, m, s, e, touch):
    """The runs over [s, e) also hold ``touch`` (per stream, the later use), neighbours holding
    alike merged; returns the new run count."""
    k, m = _cut(runs_at, held, m, s)
    j, m = _cut(runs_at, held, m, e)
    for r in range(k, j):
        for stream in range(3):
            held[r, stream] = max(held[r, stream], touch[stream])
    for r in range(j, max(k, 1) - 1, -1):          # from the right, so a removal moves nothing unseen
        if held[r, 0] == held[r - 1, 0] and held[r, 1] == held[r - 1, 1] and held[r, 2] == held[r - 1, 2]:
            for x in range(r, m - 1):               # run r removed
                runs_at[x] = runs_at[x + 1]
                held[x] = held[x + 1]
            m -= 1
    return m


@numba.njit(cache=True)
def _cut(runs_at, held, m, at):
    """The index of the run starting at ``at``, made by cutting the run containing it (room for
    one more run is the caller's); and the new run count."""
    k = np.searchsorted(runs_at[:m], at, side="right") - 1
    if runs_at[k] == at:
        return k, m
    for x in range(m, k + 1, -1):               # room at k + 1
        runs_at[x] = runs_at[x - 1]
        held[x] = held[x - 1]
    runs_at[k + 1] = at
    held[k + 1] = held[k]
    return k + 1, m + 1


@numba.njit(cache=True)
def _grown(runs_at, held, m):
    """The runs in arrays of twice the room."""
    wider_at = np.empty(2 * runs_at.shape[0], dtype=np.int64)
    wider = np.empty((2 * runs_at.shape[0], 3), dtype=np.int64)
    wider_at[:m] = runs_at[:m]
    wider[:m] = held[:m]
    return wider_at, wider
