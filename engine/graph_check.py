"""Checking a graph as a whole (``validate``) and a schedule of it (``check_order``).

``Graph.apply`` checks each node as it is added; ``validate`` checks every node again, for
graphs that did not come through it (read back by ``graph_io.graph_from_dict``) and as a last
word on builders. Both raise GraphError naming the first node or tensor at fault.
"""
from __future__ import annotations

from typing import Callable, Iterable, Sequence

import numpy as np

from ops import registry as op_registry
from ops.registry import OpError

from .ir import LEAF_KINDS, Graph, GraphError
from .schedules import in_degrees, kahn_order

NOT_EVERY_NODE_ONCE = (-1, -1)


def validate(g: Graph) -> None:
    """Check the whole graph: known operators, one producer per tensor, consistent shapes,
    no cycles, state pairs well formed. Raises GraphError naming the first bad node."""
    producer = [-1] * len(g.tensors)
    for n in g.nodes:
        try:
            decl = op_registry.get(n.op)
        except OpError as e:
            raise GraphError(f"node '{n.name}': {e}") from None
        for t in n.inputs + n.outputs:
            if not 0 <= t < len(g.tensors):
                raise GraphError(f"node '{n.name}' ({n.op}): tensor id {t} does not exist")
        for t in n.outputs:
            if producer[t] != -1:
                raise GraphError(f"node '{n.name}' ({n.op}): tensor '{g.tensors[t].name}' "
                                 f"is also produced by '{g.nodes[producer[t]].name}'")
            producer[t] = n.id
        try:
            decl.check_arity(len(n.inputs))
            specs = decl.infer(n.attrs, [g.tensors[t] for t in n.inputs])
        except OpError as e:
            raise GraphError(f"node '{n.name}' ({n.op}): {e}") from None
        if len(specs) != len(n.outputs):
            raise GraphError(f"node '{n.name}' ({n.op}): has {len(n.outputs)} outputs, "
                             f"its operator makes {len(specs)}")
        for (shape, dtype), t in zip(specs, n.outputs):
            x = g.tensors[t]
            if tuple(shape) != x.shape or np.dtype(dtype) != x.dtype:
                raise GraphError(f"node '{n.name}' ({n.op}): output '{x.name}' is declared "
                                 f"{x.shape} {x.dtype} but the shape rule gives {tuple(shape)} "
                                 f"{np.dtype(dtype)}")
    for t in g.tensors:
        if producer[t.id] == -1 and t.kind not in LEAF_KINDS:
            raise GraphError(f"tensor '{t.name}' ({t.kind.name.lower()}) has no producer")
    _check_acyclic(g, producer)
    for cur, nxt in g.state_pairs:
        a, b = g.tensors[cur], g.tensors[nxt]
        if a.shape != b.shape or a.dtype != b.dtype:
            raise GraphError(f"state '{a.name}' {a.shape} and its next value '{b.name}' {b.shape} differ")
    if g.loss is not None and g.tensors[g.loss].shape != ():
        raise GraphError(f"loss '{g.tensors[g.loss].name}' is not a scalar")
    bad = [t for t in g.outputs if not 0 <= t < len(g.tensors)]
    if bad:
        raise GraphError(f"output {bad[0]} is not a tensor of this graph ({len(g.tensors)} tensors)")


def _check_acyclic(g: Graph, producer: Sequence[int]) -> None:
    """``producer`` is validate's own (tensor -> node) map: g.producer is not trusted yet."""
    successors: list[list[int]] = [[] for _ in g.nodes]
    for n in g.nodes:
        for p in dict.fromkeys(producer[t] for t in n.inputs):
            if p >= 0:
                successors[p].append(n.id)
    stack: list[int] = []
    ran = kahn_order(successors, in_degrees(successors), stack.append, stack.pop)
    if len(ran) != len(g.nodes):
        stuck = g.nodes[min(set(range(len(g.nodes))) - set(ran))]
        raise GraphError(f"node '{stuck.name}' ({stuck.op}) is on a cycle")


def check_order(g: Graph, order: Sequence[int]) -> None:
    """Raise GraphError unless ``order`` lists every node once, each after its inputs' producers."""
    fault = misordered(order, len(g.nodes), g.predecessors)
    if fault == NOT_EVERY_NODE_ONCE:
        raise GraphError("schedule must list every node exactly once")
    if fault is not None:
        nid, p = fault
        raise GraphError(f"schedule runs node '{g.nodes[nid].name}' before its input's "
                         f"producer '{g.nodes[p].name}'")


def misordered(order: Sequence[int], num_nodes: int,
               predecessors: Callable[[int], Iterable[int]]) -> tuple[int, int] | None:
    """Why ``order`` is not a schedule of nodes 0..num_nodes-1: NOT_EVERY_NODE_ONCE, or the
    first node it runs before one of its ``predecessors(node)`` and that predecessor (the
    first such in their order); None if it is a schedule."""
    if len(order) != num_nodes or set(order) != set(range(num_nodes)):
        return NOT_EVERY_NODE_ONCE
    done = np.zeros(num_nodes, dtype=bool)
    for nid in order:
        for p in predecessors(nid):
            if not done[p]:
                return nid, p
        done[nid] = True
    return None
