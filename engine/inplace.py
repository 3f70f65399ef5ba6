"""The in-place rule, in one place: when an operator's output takes over an input's memory.

An operator declares which outputs its kernel may write over which inputs
(``Op.inplace``: an SGD update over its parameter, a running sum over its
accumulator; ``Op.inplace_for(attrs)`` where a node chooses, as ``add(in_place=True)``).
A plan uses that permission only when the input is read once by the node, has the
output's size, and dies there (nothing reads it later, and it is not kept past the
iteration), as MXNet's in-place update does.

Two questions, two functions. ``in_place_input(node, k)`` is the declaration alone: what the
verifier allows and what a schedule's write-after-read edges keep possible. ``InPlace.of(g)``
with ``taken(position, last_read, kept)`` is the decision a plan makes under an order, for
every declared write at once: liveness, size demand (``planner.facts``), the swap planner's
compiled pass and the online policies all read it, so none of them can count an in-place
write another does not honour.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ops import registry as op_registry


def in_place_input(node, out_index: int) -> int | None:
    """The index of the input output ``out_index`` of ``node`` may be written over (the
    kernel's declaration), or None."""
    return op_registry.get(node.op).inplace_for(node.attrs).get(out_index)


def in_place_pairs(node) -> list[tuple[int, int]]:
    """(output index, input index) for every output the kernel may write over an input."""
    return [(k, j) for k in range(len(node.outputs))
            if (j := in_place_input(node, k)) is not None]


@dataclass(frozen=True)
class InPlace:
    """Every declared in-place write of a graph, one row each (arrays of equal length):
    ``node``, ``out`` (the output tensor), ``out_index`` (its position among the node's
    outputs), ``src`` (the input tensor it may be written over), ``src_index`` (its position
    among the node's inputs) and ``eligible``: the part of the rule no order changes (the node
    reads ``src`` once, no earlier output of the node is written over it, and it has the
    output's size)."""
    node: np.ndarray
    out: np.ndarray
    out_index: np.ndarray
    src: np.ndarray
    src_index: np.ndarray
    eligible: np.ndarray

    _cache = weakref.WeakKeyDictionary()

    @classmethod
    def of(cls, g) -> "InPlace":
        """The declarations of graph ``g``, made once per graph (and again if it grew)."""
        key = (len(g.nodes), len(g.tensors))
        hit = cls._cache.get(g)
        if hit is not None and hit[0] == key:
            return hit[1]
        rows = []
        for n in g.nodes:
            claimed = set()         # an input is written over by the first output declaring it only
            for k, j in in_place_pairs(n):
                src, out = n.inputs[j], n.outputs[k]
                eligible = (n.inputs.count(src) == 1 and src not in claimed
                            and g.tensors[src].nbytes == g.tensors[out].nbytes)
                claimed.add(src)
                rows.append((n.id, out, k, src, j, eligible))
        cols = list(zip(*rows)) if rows else [()] * 6
        made = cls(*(np.array(c, dtype=np.int64) for c in cols[:5]), np.array(cols[5], dtype=np.bool_))
        cls._cache[g] = (key, made)
        return made

    def taken(self, position: np.ndarray, last_read: np.ndarray, kept: np.ndarray) -> np.ndarray:
        """Which declared writes a plan takes under an order (a bool per row): eligible, and the
        input dies at the node. ``position``: each node's step; ``last_read``: each tensor's
        last reading step (-1 if never read); ``kept``: tensors that must survive the iteration
        (next values of state, the loss, outputs)."""
        return self.eligible & (last_read[self.src] == position[self.node]) & ~kept[self.src]

    def sources(self, n_tensors: int, position, last_read, kept) -> np.ndarray:
        """Per tensor: the input tensor whose memory it takes under the order, or -1."""
        of = np.full(n_tensors, -1, dtype=np.int64)
        use = self.taken(position, last_read, kept)
        of[self.out[use]] = self.src[use]
        return of
