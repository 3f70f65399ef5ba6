"""What the search needs to know about one graph, computed once: ``GraphContext``.

Schedules: each node's number of distinct predecessors and its successor list (plain int
lists, so the dataflow-scheduler loops of ``schedule_ops`` never touch the Graph).
Besides the graph's dataflow edges these hold the write-after-read edges of
``engine.schedules``: from every other reader of a value to the operator that writes over it
in place (an SGD update, a gradient accumulation). MXNet's engine orders a variable's write
after its reads the same way, and it is what lets the update take over its old value's object
in every schedule the search makes, so the update's output needs no object of its own (the
per-operator minima below rely on it). Insertion order (the default order) already satisfies
these edges.

Allocations: TS (the sorted distinct tensor sizes), the per-operator demand of each size, and
the peak demand of an unlimited run in the default order. An operator runs only if all of its
distinct inputs and outputs are resident at once, so a size class needs at least as many
objects as any one operator touches tensors of that class (an updated state that takes over
its old value's object needs none: ``planner.facts.size_demand``'s per-node counts).
``class_minima(cls)`` gives that minimum for any CLS, vectorised over the distinct rows of
that (nodes x sizes) count matrix: classes are contiguous runs of sizes, so a class's count per node is a ``reduceat``
over its columns, and its minimum the largest over nodes.

The object is plain data (numpy arrays and lists) and pickles cheaply to worker processes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from allocator import aligned_bytes
from allocator.size_classes import class_last_sizes
from engine.graph_check import misordered
from engine.ir import Graph
from engine.schedules import in_degrees, schedule_successors, updates_when_ready
from planner.facts import GraphFacts


@dataclass
class GraphContext:
    name: str
    num_nodes: int
    pred_count: list[int]          # per node: distinct predecessor nodes
    successors: list[list[int]]    # per node: distinct successor nodes
    sources: list[int]             # nodes with no predecessor, ascending
    sizes: np.ndarray              # TS: distinct tensor byte sizes, ascending (int64)
    slot_bytes: np.ndarray         # per size: its object size padded to the pool's alignment
    size_minimum: np.ndarray       # per size: most tensors of that size one operator touches
    size_peak: np.ndarray          # per size: most tensors of that size live at once (default order)
    node_rows: np.ndarray          # distinct rows of the (nodes x sizes) objects-needed counts (int32)
    minimal_cls: np.ndarray        # the CLS of the allocation of fewest bytes that runs every operator
    heaviest_node: str             # the operator whose inputs and outputs need the most bytes
    heaviest_bytes: int
    # A second seed of the first generation: parameter updates as soon as they are ready
    # (engine.schedules.updates_when_ready); None where it equals the default order.
    updates_first: np.ndarray | None = None
    # Per node its distinct input tensors and its outputs (CSR), per tensor its bytes: what the
    # locality mutation (ga/locality.py) reads. Empty in a synthetic context (no tensors).
    input_ptr: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    inputs: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    output_ptr: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    outputs: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    tensor_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))

    @classmethod
    def from_graph(cls, g: Graph) -> GraphContext:
        return cls.from_facts(GraphFacts(g))

    @classmethod
    def from_facts(cls, facts: GraphFacts) -> GraphContext:
        """From the facts of a graph in its default order (demand computed there once)."""
        g = facts.graph
        n = len(g.nodes)
        successors = schedule_successors(g)
        pred_count = in_degrees(successors)
        demand = facts.demand
        node_rows = np.unique(np.asarray(demand.per_node, dtype=np.int32).reshape(n, len(demand.sizes)), axis=0)
        if node_rows.shape[0] == 0:
            node_rows = np.zeros((1, len(demand.sizes)), dtype=np.int32)
        return cls(
            name=g.name, num_nodes=n, pred_count=pred_count, successors=successors,
            sources=[v for v in range(n) if pred_count[v] == 0],
            sizes=demand.sizes.astype(np.int64), slot_bytes=aligned_bytes(demand.sizes),
            size_minimum=demand.minimum.astype(np.int64), size_peak=demand.peak.astype(np.int64),
            node_rows=node_rows, minimal_cls=facts.minimal_allocation.cls.copy(),
            heaviest_node=g.nodes[demand.heaviest_node].name if n else "",
            heaviest_bytes=int(demand.heaviest_bytes), updates_first=_updates_first(g),
            **_tensor_csr(g))

    @classmethod
    def synthetic(cls, num_nodes: int = 0, edges=(), sizes=(), node_rows=None, name: str = "synthetic",
                  peak=None) -> GraphContext:
        """A context from bare facts, for examples and tests: a DAG given as (u, v) edges over
        ``num_nodes`` nodes, and tensor ``sizes`` with optional per-node object counts
        (rows x sizes; none: every class needs 1 object) and per-size peaks (default 1)."""
        successors = [[] for _ in range(num_nodes)]
        for u, v in edges:
            if v not in successors[u]:
                successors[u].append(v)
        pred_count = in_degrees(successors)
        sizes = np.asarray(sizes, dtype=np.int64)
        rows = (np.zeros((1, sizes.size), dtype=np.int32) if node_rows is None
                else np.asarray(node_rows, dtype=np.int32).reshape(-1, sizes.size))
        minimum = rows.max(axis=0).astype(np.int64)
        peak = np.ones(sizes.size, np.int64) if peak is None else np.asarray(peak, dtype=np.int64)
        return cls(name=name, num_nodes=num_nodes, pred_count=pred_count, successors=successors,
                   sources=[v for v in range(num_nodes) if pred_count[v] == 0], sizes=sizes,
                   slot_bytes=aligned_bytes(sizes), size_minimum=minimum, size_peak=peak,
                   node_rows=rows, minimal_cls=np.arange(sizes.size), heaviest_node="",
                   heaviest_bytes=0)

    @property
    def num_sizes(self) -> int:
        return int(self.sizes.size)

    def class_minima(self, cls) -> np.ndarray:
        """Per class of a valid CLS, or of an unrestricted mapping (allocator.unrestricted_classes):
        the most tensors of that class one operator touches (>= 1)."""
        cls = np.asarray(cls, dtype=np.int64)
        rows = self.node_rows
        if np.any(np.diff(cls) < 0):        # classes that are not runs: gather each class's sizes
            order = np.argsort(cls, kind="stable")
            cls, rows = cls[order], rows[:, order]
        starts = np.concatenate(([0], np.flatnonzero(np.diff(cls)) + 1))
        per_node = np.add.reduceat(rows, starts, axis=1)
        return np.maximum(per_node.max(axis=0), 1).astype(np.int64)

    def class_slot_bytes(self, cls) -> np.ndarray:
        """Per class: its padded object size (the largest size mapped to it)."""
        return self.slot_bytes[class_last_sizes(cls)]

    def class_peaks(self, cls) -> np.ndarray:
        """Per class: the sum of its sizes' peak demand (more objects than that are never used)."""
        cls = np.asarray(cls, dtype=np.int64)
        return np.maximum(np.bincount(cls, weights=self.size_peak).astype(np.int64), 1)

    def dag_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The successor lists as (pointers, successors) arrays and the predecessor counts as an
        array, for compiled loops (made once per context, not per child)."""
        got = self.__dict__.get("_dag_arrays")
        if got is None:
            got = self.__dict__["_dag_arrays"] = (*_csr(self.successors),
                                                   np.asarray(self.pred_count, dtype=np.int64))
        return got

    def check_order(self, order) -> bool:
        """Whether ``order`` lists every node once, each after all of its predecessors."""
        predecessors: list[list[int]] = [[] for _ in range(self.num_nodes)]
        for v, succ in enumerate(self.successors):
            for s in succ:
                predecessors[s].append(v)
        order = np.asarray(order, dtype=np.int64).tolist()
        return misordered(order, self.num_nodes, predecessors.__getitem__) is None


def _csr(lists) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(x) for x in lists])
    flat = np.fromiter((v for x in lists for v in x), dtype=np.int64, count=int(ptr[-1]))
    return ptr, flat


def _tensor_csr(g: Graph) -> dict:
    input_ptr, inputs = _csr([list(dict.fromkeys(n.inputs)) for n in g.nodes])
    output_ptr, outputs = _csr([n.outputs for n in g.nodes])
    return dict(input_ptr=input_ptr, inputs=inputs, output_ptr=output_ptr, outputs=outputs,
                tensor_bytes=np.array([t.nbytes for t in g.tensors], dtype=np.float64))


def _updates_first(g: Graph) -> np.ndarray | None:
    order = np.asarray(updates_when_ready(g), dtype=np.int32)
    return None if np.array_equal(order, np.arange(len(g.nodes))) else order
