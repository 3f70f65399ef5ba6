"""Tensor lifetimes under a schedule, and the peak memory of an unlimited run.

A tensor is live from the step that produces it (leaves: from the start) to the
step that last reads it. The next value of a parameter or optimizer state lives
to the end of the iteration. An output that an operator may write over one of
its inputs takes over that input's storage under the in-place rule
(``engine.inplace``), so the pair counts once, as the planner places it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


from .inplace import InPlace
from .ir import Graph


@dataclass
class Lifetimes:
    """Per tensor id: ``start``/``end`` step positions (inclusive; -1 for unused),
    ``inplace_of`` = the tensor whose storage it reuses (-1 for none)."""
    start: np.ndarray
    end: np.ndarray
    inplace_of: np.ndarray

    def storage(self) -> tuple[np.ndarray, np.ndarray]:
        """(owns, end): ``owns[t]`` when t needs storage of its own (it is not written over
        another tensor); ``end[t]``, for those, the last step of anything kept in that
        storage, following chains of in-place writes (a running gradient sum)."""
        owns = self.inplace_of < 0
        end = self.end.copy()
        root = np.arange(len(end))
        merged = np.nonzero(~owns)[0]
        for t in merged[np.argsort(self.start[merged], kind="stable")]:   # chains in production order
            root[t] = root[self.inplace_of[t]]
        np.maximum.at(end, root[merged], self.end[merged])
        return owns, end


def positions(g: Graph, order: Sequence[int]) -> np.ndarray:
    """Step position of each node id in ``order``."""
    pos = np.empty(len(g.nodes), dtype=np.int64)
    pos[np.asarray(order, dtype=np.int64)] = np.arange(len(order))
    return pos


def kept_mask(g: Graph) -> np.ndarray:
    """Per tensor, whether it must survive the iteration (no in-place write may take it): the
    next values of state, the loss and the graph's outputs (``Graph.read_back``)."""
    kept = np.zeros(len(g.tensors), dtype=np.bool_)
    kept[g.read_back()] = True
    kept[[nxt for _, nxt in g.state_pairs]] = True
    return kept


def lifetimes(g: Graph, order: Sequence[int]) -> Lifetimes:
    n_steps = len(order)
    pos = positions(g, order)
    producer = np.asarray(g.producer, dtype=np.int64)
    start = np.where(producer >= 0, pos[np.maximum(producer, 0)], 0)
    end = start.copy()
    for p, nid in enumerate(order):
        for t in g.nodes[nid].inputs:
            end[t] = p      # order is ascending, so the last write is the last use
    end[g.read_back()] = n_steps - 1     # read back after the iteration
    for _, nxt in g.state_pairs:
        end[nxt] = n_steps - 1
    kept = kept_mask(g)
    # A tensor's end is its last read (or its start when nothing reads it, which no in-place
    # write can then take: the node that would take it reads it).
    inplace_of = InPlace.of(g).sources(len(g.tensors), pos, end, kept)
    return Lifetimes(start, end, inplace_of)


def live_bytes_per_step(g: Graph, order: Sequence[int], lt: Lifetimes | None = None) -> np.ndarray:
    """Bytes of tensors live while each step runs (its inputs and outputs included);
    ``lt``: the order's lifetimes, if already known."""
    lt = lifetimes(g, order) if lt is None else lt
    sizes = np.array([t.nbytes for t in g.tensors], dtype=np.int64)
    counted, end = lt.storage()     # an in-place chain is one allocation
    diff = np.zeros(len(order) + 1, dtype=np.int64)
    np.add.at(diff, lt.start[counted], sizes[counted])
    np.add.at(diff, end[counted] + 1, -sizes[counted])
    return np.cumsum(diff[:-1])


def peak_bytes(g: Graph, order: Sequence[int] | None = None) -> int:
    """Peak device memory of the unlimited-memory run: every tensor freed after its last use."""
    order = g.default_order() if order is None else order
    if not order:
        return sum(t.nbytes for t in g.tensors)
    return int(live_bytes_per_step(g, order).max())
