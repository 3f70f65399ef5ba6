"""Tensor lifetimes under a schedule, and the peak memory of an unlimited run.

A tensor is live from the step that produces it (leaves: from the start) to the
step that last reads it. Persistent state is special: the next value of a
parameter or optimizer state lives to the end of the iteration, and when it is
produced by the step where its current value dies (an SGD update), it takes
over the current value's storage (MXNet's in-place update), so the pair counts
once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .ir import Graph


@dataclass
class Lifetimes:
    """Per tensor id: ``start``/``end`` step positions (inclusive; -1 for unused),
    ``inplace_of`` = the tensor whose storage it reuses (-1 for none)."""
    start: np.ndarray
    end: np.ndarray
    inplace_of: np.ndarray


def positions(g: Graph, order: Sequence[int]) -> np.ndarray:
    """Step position of each node id in ``order``."""
    pos = np.empty(len(g.nodes), dtype=np.int64)
    pos[np.asarray(order, dtype=np.int64)] = np.arange(len(order))
    return pos


def lifetimes(g: Graph, order: Sequence[int]) -> Lifetimes:
    n_steps = len(order)
    pos = positions(g, order)
    producer = np.asarray(g.producer, dtype=np.int64)
    start = np.where(producer >= 0, pos[np.maximum(producer, 0)], 0)
    end = start.copy()
    for p, nid in enumerate(order):
        for t in g.nodes[nid].inputs:
            end[t] = p      # order is ascending, so the last write is the last use
    if g.loss is not None:
        end[g.loss] = n_steps - 1     # read back after the iteration
    inplace_of = np.full(len(g.tensors), -1, dtype=np.int64)
    for cur, nxt in g.state_pairs:
        end[nxt] = n_steps - 1
        if end[cur] == start[nxt]:
            inplace_of[nxt] = cur
    return Lifetimes(start, end, inplace_of)


def live_bytes_per_step(g: Graph, order: Sequence[int]) -> np.ndarray:
    """Bytes of tensors live while each step runs (its inputs and outputs included)."""
    lt = lifetimes(g, order)
    sizes = np.array([t.nbytes for t in g.tensors], dtype=np.int64)
    counted = lt.inplace_of < 0
    diff = np.zeros(len(order) + 1, dtype=np.int64)
    np.add.at(diff, lt.start[counted], sizes[counted])
    # An in-place pair is one allocation: the current value's interval runs to the next's end.
    end = lt.end.copy()
    merged = np.nonzero(~counted)[0]
    end[lt.inplace_of[merged]] = np.maximum(end[lt.inplace_of[merged]], end[merged])
    np.add.at(diff, end[counted] + 1, -sizes[counted])
    return np.cumsum(diff[:-1])


def peak_bytes(g: Graph, order: Sequence[int] | None = None) -> int:
    """Peak device memory of the unlimited-memory run: every tensor freed after its last use."""
    order = g.default_order() if order is None else order
    if not order:
        return sum(t.nbytes for t in g.tensors)
    return int(live_bytes_per_step(g, order).max())
