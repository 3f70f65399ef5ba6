"""The reference interpreter: run a graph in a given topological order on numpy,
with unlimited memory. Everything else (planner, CPU and CUDA backends) is
checked against it."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ops import registry as op_registry

from .ir import Graph, GraphError

ALIGNMENT = 64


def aligned_empty(shape, dtype, alignment: int = ALIGNMENT) -> np.ndarray:
    """An uninitialized array whose data starts on an ``alignment``-byte boundary, as pool
    objects do, so that vectorized kernels take the same code path everywhere."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(n + alignment, dtype=np.uint8)
    start = (-raw.ctypes.data) % alignment
    return raw[start:start + n].view(dtype).reshape(shape)


def last_use_positions(g: Graph, order: Sequence[int]) -> np.ndarray:
    """Position in ``order`` of the last node reading each tensor (-1 if none reads it)."""
    last = np.full(len(g.tensors), -1, dtype=np.int64)
    for pos, nid in enumerate(order):
        last[list(g.nodes[nid].inputs)] = pos
    return last


def run(g: Graph, feeds: Mapping[int, np.ndarray], order: Sequence[int] | None = None,
        keep: Sequence[int] | None = None) -> dict[int, np.ndarray]:
    """Execute every node of ``g`` in ``order`` (default: insertion order).

    Inputs: ``feeds`` gives an array for every leaf tensor (inputs, labels,
    parameters, state). Output: the arrays of the tensors in ``keep`` (default:
    every tensor), each tensor being freed after its last use otherwise.
    """
    order = g.default_order() if order is None else list(order)
    g.check_order(order)
    values: dict[int, np.ndarray] = {}
    for t in g.leaves():
        if t not in feeds:
            raise GraphError(f"no value fed for leaf tensor '{g.tensors[t].name}'")
        x = g.tensors[t]
        a = np.asarray(feeds[t])
        if a.shape != x.shape or a.dtype != x.dtype:
            raise GraphError(f"value fed for '{x.name}' is {a.shape} {a.dtype}, expected {x.shape} {x.dtype}")
        values[t] = a
    keep_all = keep is None
    kept = set() if keep_all else set(keep)
    last = last_use_positions(g, order)
    for pos, nid in enumerate(order):
        n = g.nodes[nid]
        outs = [aligned_empty(g.tensors[t].shape, g.tensors[t].dtype) for t in n.outputs]
        op_registry.get(n.op).compute(n.attrs, [values[t] for t in n.inputs], outs)
        values.update(zip(n.outputs, outs))
        if not keep_all:
            for t in n.inputs + n.outputs:
                if last[t] <= pos and t not in kept:
                    values.pop(t, None)
    if keep_all:
        return values
    return {t: values[t] for t in kept}
