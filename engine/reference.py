"""The reference interpreter: run a graph in a given topological order on numpy,
with unlimited memory. Everything else (planner, CPU and CUDA backends) is
checked against it."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ops import registry as op_registry

from .arrays import aligned_empty
from .graph_check import check_order
from .ir import Graph, GraphError


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
    every tensor); other tensors are freed after their last use.
    """
    order = g.default_order() if order is None else list(order)
    check_order(g, order)
    return execute(g, order, feeds, keep)


def execute(g: Graph, steps: Sequence[int], feeds: Mapping[int, np.ndarray],
            keep: Sequence[int] | None = None) -> dict[int, np.ndarray]:
    """Run the nodes ``steps`` (any subset, in an order that respects their data
    dependencies; not checked) given arrays for every tensor they read but none produces."""
    values: dict[int, np.ndarray] = {}
    produced = {t for nid in steps for t in g.nodes[nid].outputs}
    for t in {t for nid in steps for t in g.nodes[nid].inputs} - produced:
        x = g.tensors[t]
        if t not in feeds:
            raise GraphError(f"no value fed for tensor '{x.name}'")
        a = np.asarray(feeds[t])
        if a.shape != x.shape or a.dtype != x.dtype:
            raise GraphError(f"value fed for '{x.name}' is {a.shape} {a.dtype}, expected {x.shape} {x.dtype}")
        values[t] = a
    keep_all = keep is None
    kept = set() if keep_all else set(keep)
    last = last_use_positions(g, steps)
    for pos, nid in enumerate(steps):
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
    missing = kept - values.keys() - {t for t in kept if t in feeds}
    if missing:
        raise GraphError(f"asked to keep '{g.tensors[min(missing)].name}', which these steps do not produce")
    return {t: values[t] if t in values else feeds[t] for t in kept}
