"""SmartSwap's detailed monitoring mode (004 Section 3, "Detailed Mode"; Table 1's 34.6%).

The low-overhead mode (``engine.op_monitor``) turns an iteration into one token per operator.
The detailed mode, which 004 runs while generating a policy, records what a policy and the
executor's tensor matching need: per operator its name and its input and output tensor arrays,
per tensor its pointer, type, usage count and call stack, and each iteration's duration. Here:

- pointer (004's ``data_ptr``): the tensor's byte offset in our arena when the operator ran
  (``Arena.object_offset`` of the object the Program placed it in for that instruction; a
  tensor swapped out and back may come back at another address, as in an eager framework);
- type: its dtype;
- usage count: the operators of its graph that read it (``Graph.users``);
- call stack: where it was made. We have no Python stack per operator; our analog is the name
  of the node that produced it, which carries the model builder's scopes (``block3/attn/...``,
  ``engine.layer_scopes``) and, for a gradient, its forward node's name; a leaf's is its kind and
  name (``parameter:block3/wq``). Like 004's fuzzy matching, names are interned: a record holds
  integers, ``names`` the strings.

It is called at the simple mode's hook (``engine.library.stream_plans.WindowObserver``, after
each observed iteration) and, as a dispatch hook would, walks every operator the iteration ran
each time: nothing of one iteration's records is reused for the next, so its cost is the
per-operator cost 004's Table 1 measures. ``program_of(graph)`` gives the Program a graph ran.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .ir import Graph
from .program import COMPUTE, Program

KEEP = 8        # iterations of records kept (GenPolicy lasts n = 5 observed iterations in 004)


@dataclass(frozen=True)
class IterationRecord:
    """One observed iteration, column by column. Operator k (in the order the Programs ran them,
    graph after graph) is ``names[op_name[k]]``, of graph ``graphs[op_graph[k]]``; its tensors are
    rows ``io_ptr[k]:io_ptr[k + 1]`` of the tensor columns, its ``n_inputs[k]`` inputs first."""
    iteration: int
    seconds: float                # the iteration's duration (its graphs together, as the trainer timed them)
    graphs: tuple[str, ...]
    op_name: np.ndarray           # int32, into DetailedMonitor.names
    op_graph: np.ndarray          # int32, into graphs
    recompute: np.ndarray         # bool: the Program ran the node again
    n_inputs: np.ndarray          # int32
    io_ptr: np.ndarray            # int64, operators + 1
    tensor: np.ndarray            # int64: tensor id in its graph
    address: np.ndarray           # int64: byte offset in the arena (our data_ptr)
    dtype: np.ndarray             # int16, into DetailedMonitor.dtypes
    readers: np.ndarray           # int32: the operators that read it (usage count)
    origin: np.ndarray            # int32, into DetailedMonitor.names: where it was made

    @property
    def operators(self) -> int:
        return len(self.op_name)


class DetailedMonitor:
    """Records each observed iteration (``observe``) as an ``IterationRecord``; keeps the last
    ``keep`` of them and every iteration's duration."""

    def __init__(self, program_of: Callable[[Graph], Program], keep: int = KEEP):
        self.program_of = program_of
        self.names: list[str] = []
        self._name_ids: dict[str, int] = {}
        self.dtypes: list[np.dtype] = []
        self._dtype_ids: dict[np.dtype, int] = {}
        self.records: deque[IterationRecord] = deque(maxlen=keep)
        self.durations: list[tuple[int, float]] = []       # (iteration, seconds), every observed one
        self.seconds = 0.0                                 # the monitor's own time, all iterations

    def _name(self, s: str) -> int:
        i = self._name_ids.get(s)
        if i is None:
            i = self._name_ids[s] = len(self.names)
            self.names.append(s)
        return i

    def _dtype(self, d: np.dtype) -> int:
        i = self._dtype_ids.get(d)
        if i is None:
            i = self._dtype_ids[d] = len(self.dtypes)
            self.dtypes.append(d)
        return i

    def _origin(self, g: Graph, t: int) -> int:
        p = g.producer[t]
        if p >= 0:
            return self._name(g.nodes[p].name)
        x = g.tensors[t]
        return self._name(f"{x.kind.name.lower()}:{x.name}")

    def observe(self, iteration: int, graphs: list[Graph], seconds: float) -> IterationRecord:
        """Record the operators ``graphs`` ran (their Programs' compute instructions, in order)."""
        t0 = time.perf_counter()
        op_name, op_graph, recompute, n_inputs, io_ptr = [], [], [], [], [0]
        tensor, address, dtype, readers, origin = [], [], [], [], []
        for gi, g in enumerate(graphs):
            program = self.program_of(g)
            offsets = program.arena.object_offset
            nodes, tensors, users = g.nodes, g.tensors, g.users
            for ins in program.instrs:
                if ins.kind != COMPUTE:
                    continue
                node = nodes[ins.target]
                op_name.append(self._name(node.name))
                op_graph.append(gi)
                recompute.append(ins.recompute)
                n_inputs.append(len(node.inputs))
                for t, o in zip(node.inputs + node.outputs, ins.objects):
                    tensor.append(t)
                    address.append(int(offsets[o]))
                    dtype.append(self._dtype(tensors[t].dtype))
                    readers.append(len(users[t]))
                    origin.append(self._origin(g, t))
                io_ptr.append(len(tensor))
        record = IterationRecord(
            iteration, float(seconds), tuple(g.name for g in graphs),
            np.array(op_name, dtype=np.int32), np.array(op_graph, dtype=np.int32), np.array(recompute, dtype=bool),
            np.array(n_inputs, dtype=np.int32), np.array(io_ptr, dtype=np.int64), np.array(tensor, dtype=np.int64),
            np.array(address, dtype=np.int64), np.array(dtype, dtype=np.int16), np.array(readers, dtype=np.int32),
            np.array(origin, dtype=np.int32))
        self.records.append(record)
        self.durations.append((iteration, float(seconds)))
        self.seconds += time.perf_counter() - t0
        return record
