"""The online policies' reuse edges, compiled: each object's first write waits, per stream, for the
last instruction that used any earlier object (by first write) sharing a physical byte with it.

Without listing every pair of objects that share a byte (quadratic in the objects one stretch of
memory sees over an iteration): objects are visited in first-write order, and a segment tree over
the stretches between the pieces' boundaries holds, per stream, the last instruction that used any
object visited so far covering each stretch; an object reads the largest over its pieces' stretches,
then raises them to its own uses. Objects first written by one instruction do not precede each
other: a group of them reads before any of them is added. (Sorted runs of bytes, cut and merged in
place, did the same: each cut shifted every run after it, and a pass's runs grew with the graph,
NasNet-16's window search spending 2.4 of its 15 CPU-s there against 0.27 at NasNet-4.)

Compiled (numba) because the online policies make a Program per candidate they tune (lms: 108 per
budget), and in Python this walk was a quarter of lms's planning (NasNet-4: 5.9 of 27 CPU-s)."""
from __future__ import annotations

from itertools import chain

import numba
import numpy as np

from engine.program import Arena

from .first_compile import announced

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
    real = end > start
    bounds = np.unique(np.concatenate((start[real], end[real])))     # stretch k: [bounds[k], bounds[k + 1])
    leaves = 1
    while leaves < max(len(bounds) - 1, 1):
        leaves *= 2
    top = np.full((2 * leaves, 3), -1, dtype=np.int64)    # per node, per stream: the latest use in its stretches
    whole = np.full((2 * leaves, 3), -1, dtype=np.int64)  # ...and a use every stretch under it has had
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
                        _read(top, whole, leaves, np.searchsorted(bounds, start[p]),
                              np.searchsorted(bounds, end[p]), extra[o])
        for i in range(g, h):
            o = order[i]
            for p in range(ptr[o], ptr[o + 1]):
                if end[p] > start[p]:
                    _hold(top, whole, leaves, np.searchsorted(bounds, start[p]), np.searchsorted(bounds, end[p]),
                          used[o])
        g = h
    return extra


@numba.njit(cache=True)
def _read(top, whole, leaves, lo, hi, latest):
    """``latest`` (per stream) raised to the latest use held over stretches [lo, hi): the nodes
    that cover them exactly, and what every stretch under the first's and the last's ancestors
    has had (both stretches lie in the range, so those raise nothing beyond it)."""
    for leaf in (lo + leaves, hi - 1 + leaves):
        node = leaf >> 1
        while node >= 1:
            for stream in range(3):
                latest[stream] = max(latest[stream], whole[node, stream])
            node >>= 1
    lo += leaves
    hi += leaves
    while lo < hi:
        if lo & 1:
            for stream in range(3):
                latest[stream] = max(latest[stream], top[lo, stream])
            lo += 1
        if hi & 1:
            hi -= 1
            for stream in range(3):
                latest[stream] = max(latest[stream], top[hi, stream])
        lo >>= 1
        hi >>= 1


@numba.njit(cache=True)
def _hold(top, whole, leaves, lo, hi, touch):
    """Stretches [lo, hi) also hold ``touch`` (per stream, the later use)."""
    first, last = lo + leaves, hi - 1 + leaves
    lo += leaves
    hi += leaves
    while lo < hi:
        if lo & 1:
            _raise(top, whole, leaves, lo, touch)
            lo += 1
        if hi & 1:
            hi -= 1
            _raise(top, whole, leaves, hi, touch)
        lo >>= 1
        hi >>= 1
    for leaf in (first, last):                     # their ancestors' latest, from their children's
        node = leaf >> 1
        while node >= 1:
            for stream in range(3):
                top[node, stream] = max(top[2 * node, stream], top[2 * node + 1, stream], whole[node, stream])
            node >>= 1


@numba.njit(cache=True)
def _raise(top, whole, leaves, node, touch):
    for stream in range(3):
        top[node, stream] = max(top[node, stream], touch[stream])
        if node < leaves:
            whole[node, stream] = max(whole[node, stream], touch[stream])
