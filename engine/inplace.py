"""The in-place rule, in one place: when an operator's output takes over an input's memory.

An operator declares which outputs its kernel may write over which inputs
(``Op.inplace``: an SGD update over its parameter, a running sum over its
accumulator; ``Op.inplace_for(attrs)`` where a node chooses, as ``add(in_place=True)``).
A plan uses that permission only when the input is read once by the
node and dies there (nothing reads it later, and it is not kept past the iteration),
as MXNet's in-place update does. Liveness, size demand, the swap planner, the
verifier and the schedule's write-after-read edges all ask ``in_place_input``.
"""
from __future__ import annotations

from typing import Callable

from ops import registry as op_registry


def in_place_input(node, out_index: int, dies: Callable[[int], bool] | None = None) -> int | None:
    """The index of the input whose memory output ``out_index`` of ``node`` takes, or None.

    Without ``dies``: the input the kernel may write over (the declaration alone: what the
    verifier allows, what a schedule keeps possible, what per-operator demand assumes).
    With ``dies(tensor) -> bool``: only when that input is read once by the node and
    ``dies`` says it is not needed after this node (what liveness and the planner do)."""
    j = op_registry.get(node.op).inplace_for(node.attrs).get(out_index)
    if j is None or dies is None:
        return j
    t = node.inputs[j]
    if node.inputs.count(t) != 1 or not dies(t):
        return None
    return j


def in_place_pairs(node) -> list[tuple[int, int]]:
    """(output index, input index) for every output the kernel may write over an input."""
    return [(k, j) for k in range(len(node.outputs))
            if (j := in_place_input(node, k)) is not None]
