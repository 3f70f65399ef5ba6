"""Facts about one graph under one order, each computed once and passed by name.

Planning asks the same questions of a graph many times: how many tensors of each size
live at once (``size_demand``), what each operator needs resident, how much operator
scratch the arena must keep, the smallest budget that runs. ``GraphFacts(graph, order)``
answers each on first use and keeps the answer, so a run makes one and hands it to the
budget, the allocations, the policies and the search (as NNVM passes declare what they
need and provide).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import numpy as np

from allocator import Allocation, aligned_bytes
from engine.ir import Graph
from engine.liveness import Lifetimes, lifetimes, live_bytes_per_step
from ops import registry as op_registry

from . import allocation


@dataclass(frozen=True)
class OperatorScratch:
    """The most device scratch any one operator declares (``Op.workspace``), aligned like
    arena objects, and the node needing it (-1 if none). Kernels run one at a time on the
    compute stream, so one region of this size at the arena's end serves every operator."""
    bytes: int
    node: int


def operator_scratch(g: Graph) -> OperatorScratch:
    need, node = 0, -1
    for n in g.nodes:
        b = op_registry.get(n.op).workspace(n.attrs, [g.tensors[t] for t in n.inputs],
                                            [g.tensors[t] for t in n.outputs])
        if b > need:
            need, node = int(b), n.id
    return OperatorScratch(int(aligned_bytes(need)), node)


@dataclass
class SizeDemand:
    sizes: np.ndarray         # TS: distinct tensor sizes, ascending
    size_index: np.ndarray    # per tensor id: its index in sizes
    peak: np.ndarray          # per size: most tensors of that size live at once (unlimited run)
    minimum: np.ndarray       # per size: most tensors of that size one operator touches
    per_node: np.ndarray      # [node, size]: how many objects of that size the node needs at once
    heaviest_node: int        # the node whose inputs and outputs need the most bytes
    heaviest_bytes: int


def size_demand(g: Graph, order: Sequence[int], lt: Lifetimes | None = None) -> SizeDemand:
    """Demand per tensor size under ``order`` (``lt``: its lifetimes, if already known).
    Call it through ``GraphFacts.demand``."""
    nbytes = np.array([t.nbytes for t in g.tensors], dtype=np.int64)
    sizes, size_index = np.unique(nbytes, return_inverse=True)
    lt = lifetimes(g, order) if lt is None else lt
    n_steps = max(1, len(order))
    live = np.zeros((len(sizes), n_steps + 1), dtype=np.int64)
    counted, end = lt.storage()     # an in-place chain is one object
    np.add.at(live, (size_index[counted], lt.start[counted]), 1)
    np.add.at(live, (size_index[counted], end[counted] + 1), -1)
    peak = np.cumsum(live, axis=1)[:, :n_steps].max(axis=1)
    per_node = np.zeros((len(g.nodes), len(sizes)), dtype=np.int32)
    heaviest, heaviest_bytes = -1, -1
    for n in g.nodes:
        # An output written over an input (the in-place rule under this order, as the planner
        # decides it) needs no object of its own.
        ts = [t for t in dict.fromkeys(n.inputs + n.outputs) if lt.inplace_of[t] < 0 or t not in n.outputs]
        np.add.at(per_node[n.id], size_index[ts], 1)
        b = int(nbytes[ts].sum())
        if b > heaviest_bytes:
            heaviest, heaviest_bytes = n.id, b
    minimum = per_node.max(axis=0).astype(np.int64) if len(g.nodes) else np.zeros(len(sizes), np.int64)
    return SizeDemand(sizes, size_index, np.maximum(peak, minimum), minimum, per_node, heaviest, heaviest_bytes)


class GraphFacts:
    """What planning needs to know about ``graph`` under ``order`` (default: insertion order)."""

    def __init__(self, graph: Graph, order: Sequence[int] | None = None):
        self.graph = graph
        self.order = graph.default_order() if order is None else [int(n) for n in order]

    @cached_property
    def lifetimes(self) -> Lifetimes:
        return lifetimes(self.graph, self.order)

    @cached_property
    def demand(self) -> SizeDemand:
        return size_demand(self.graph, self.order, self.lifetimes)

    @cached_property
    def scratch(self) -> OperatorScratch:
        return operator_scratch(self.graph)

    @cached_property
    def peak_bytes(self) -> int:
        """Peak device memory of the unlimited-memory run under this order."""
        if not self.order:
            return sum(t.nbytes for t in self.graph.tensors)
        return int(live_bytes_per_step(self.graph, self.order, self.lifetimes).max())

    @cached_property
    def minimal_allocation(self) -> Allocation:
        return allocation.minimal_allocation(self.demand)

    @property
    def smallest_budget(self) -> int:
        """Device bytes of the minimal allocation plus operator scratch: no budget below it
        can run every operator."""
        return int(self.minimal_allocation.pool_bytes) + self.scratch.bytes
