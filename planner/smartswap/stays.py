"""Stays: each time a storage is on the device, from its swap-in or first write to its
release point, as Algorithm 2's decisions (``Storage.gaps``) lay them out."""
from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from engine.ir import Graph

from ..swap_planner import GraphArrays
from .candidates import Storage


@dataclass(eq=False)
class Stay:
    """One stay of a storage on the device. Its bytes are taken before step ``start`` (-1:
    resident state, before the iteration) by a swap-in of ``swap_in`` or by the compute that
    first writes it, and given back after step ``free_after`` (the release point; beyond the
    last step: never). ``out_after``: the step after which a swap-out ends it (None: no swap-out),
    copying to the host if ``copy_out``."""
    storage: Storage
    nbytes: int
    start: int
    swap_in: int | None
    out_after: int | None
    free_after: int
    copy_out: bool = False
    first_use: int = 0            # the first step that uses it


def kept_values(g: Graph) -> set:
    """Tensors whose last stay lasts to the end: the planner's one notion of what outlives the
    iteration (``GraphArrays.kept``: next values of state, and ``Graph.read_back``, the loss and
    the graph's outputs, so an output nothing reads is not released after its last use), except
    state that nothing updates and nothing reads back: its host copy stays current, so it may
    leave after its last read (Algorithm 2's ``unchanged``)."""
    unchanged = {cur for cur, nxt in g.state_pairs if cur == nxt} - set(g.read_back())
    return set(np.flatnonzero(GraphArrays.of(g).kept).tolist()) - unchanged


def stays(stores: list[Storage], n: int, kept: set, release_at_sync: bool) -> list[Stay]:
    """The stays of ``stores`` over ``n`` steps, released at the decided points or, with
    ``release_at_sync``, a copied-out stay at the iteration's end (the next synchronization)."""
    out = []
    for st in stores:
        if st.pinned:
            out.append(Stay(st, st.nbytes, -1, None, None, n, first_use=st.steps[0]))
            continue
        begin, swap_in, copied = st.steps[0], None, None
        for a, b, r, p in sorted(st.gaps):
            if a >= 0:
                content = st.content(a)
                copy = not (st.host_leaf and content == st.root) and content != copied
                release = n - 1 if release_at_sync and copy else r
                out.append(Stay(st, st.nbytes, begin, swap_in, a, release, copy, use_from(st, begin)))
                copied = content if copy else copied
                swap_in = content
            else:
                swap_in = st.root
            begin = p
        last = st.steps[-1]
        if st.copy_out_at_end:
            release = n - 1 if release_at_sync else st.end_release
            out.append(Stay(st, st.nbytes, begin, swap_in, last, release, True, use_from(st, begin)))
        else:
            members = set(st.writes.values()) | {st.root}
            out.append(Stay(st, st.nbytes, begin, swap_in, None, n if members & kept else last, False,
                            use_from(st, begin)))
    return out


def use_from(st: Storage, step: int) -> int:
    """The first step at or after ``step`` that uses the storage."""
    k = bisect.bisect_left(st.steps, max(step, 0))
    return st.steps[min(k, len(st.steps) - 1)]
