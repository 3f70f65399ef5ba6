"""Which nodes a plan may run again (a recomputation), in one place.

A recomputation is a compute instruction of a node whose outputs were dropped, placed later
in the Program than the node's own step (``Instr.recompute``). It recreates the very values the
node first wrote only when those depend on the node's inputs alone: the operator declares it
(``Op.recomputable``: False for updates, accumulations into state, anything with state outputs
or randomness). The verifier refuses a recomputation of any other node, and planners ask here
which producers they may recompute.
"""
from __future__ import annotations

import weakref

import numpy as np

from ops import registry as op_registry


def recomputable(node) -> bool:
    """Whether running ``node`` again rewrites exactly the values it first wrote."""
    op = op_registry.get(node.op)
    return bool(op.recomputable) and not op.state_outputs


_MASKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def recomputable_mask(g) -> np.ndarray:
    """Per node of graph ``g``, ``recomputable`` (made once per graph, again if it grew)."""
    hit = _MASKS.get(g)
    if hit is None or len(hit) != len(g.nodes):
        hit = _MASKS[g] = np.fromiter((recomputable(n) for n in g.nodes), dtype=np.bool_, count=len(g.nodes))
    return hit
