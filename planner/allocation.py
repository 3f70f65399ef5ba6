"""Allocations derived from a graph: demand per tensor size, the smallest budget, a simple allocation.

An operator runs only if its inputs and outputs are all resident at once, so
each size class needs at least as many objects as any one operator uses of
that class. With one class per distinct size, that minimum gives the smallest
budget the planner can run; an allocation below it is refused with a message
naming the operator that needs the most memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from allocator import Allocation, aligned_bytes
from engine.ir import Graph
from engine.liveness import lifetimes
from engine.units import format_bytes

from .swap_planner import PlanError


@dataclass
class SizeDemand:
    sizes: np.ndarray         # TS: distinct tensor sizes, ascending
    size_index: np.ndarray    # per tensor id: its index in sizes
    peak: np.ndarray          # per size: most tensors of that size live at once (unlimited run)
    minimum: np.ndarray       # per size: most tensors of that size one operator touches
    heaviest_node: int        # the node whose inputs and outputs need the most bytes
    heaviest_bytes: int


def size_demand(g: Graph, order: Sequence[int]) -> SizeDemand:
    nbytes = np.array([t.nbytes for t in g.tensors], dtype=np.int64)
    sizes, size_index = np.unique(nbytes, return_inverse=True)
    lt = lifetimes(g, order)
    n_steps = max(1, len(order))
    live = np.zeros((len(sizes), n_steps + 1), dtype=np.int64)
    counted = lt.inplace_of < 0
    np.add.at(live, (size_index[counted], lt.start[counted]), 1)
    end = lt.end.copy()
    merged = np.nonzero(~counted)[0]
    end[lt.inplace_of[merged]] = np.maximum(end[lt.inplace_of[merged]], end[merged])
    np.add.at(live, (size_index[counted], end[counted] + 1), -1)
    peak = np.cumsum(live, axis=1)[:, :n_steps].max(axis=1)
    minimum = np.zeros(len(sizes), dtype=np.int64)
    heaviest, heaviest_bytes = -1, -1
    for n in g.nodes:
        ts = list(dict.fromkeys(n.inputs + n.outputs))
        np.maximum.at(minimum, size_index[ts], np.bincount(size_index[ts])[size_index[ts]])
        b = int(nbytes[ts].sum())
        if b > heaviest_bytes:
            heaviest, heaviest_bytes = n.id, b
    return SizeDemand(sizes, size_index, np.maximum(peak, minimum), minimum, heaviest, heaviest_bytes)


def smallest_budget(d: SizeDemand) -> int:
    """Pool bytes of one class per size holding each size's per-operator minimum."""
    return int((aligned_bytes(d.sizes) * d.minimum).sum())


def check_budget(g: Graph, d: SizeDemand, budget: int) -> None:
    """PlanError naming the heaviest operator if ``budget`` is below the smallest that runs."""
    need = smallest_budget(d)
    if budget < need:
        node = g.nodes[d.heaviest_node]
        raise PlanError(f"a budget of {format_bytes(budget)} cannot run {node.name} ({node.op}; its inputs "
                        f"and outputs alone need {format_bytes(d.heaviest_bytes)}); the smallest budget "
                        f"that runs this model is {format_bytes(need)}")


def simple_allocation(g: Graph, order: Sequence[int], budget: int) -> Allocation:
    """One class per distinct size; each gets its per-operator minimum, then a common fraction
    of the objects it would need for no swapping at all, as far as the budget allows."""
    d = size_demand(g, order)
    check_budget(g, d, budget)
    slot = aligned_bytes(d.sizes)
    spare = budget - int((slot * d.minimum).sum())
    extra = d.peak - d.minimum
    want = int((slot * extra).sum())
    frac = 1.0 if want <= spare else spare / want
    cnt = d.minimum + np.floor(extra * frac).astype(np.int64)
    # Spend what flooring left, largest sizes first, without exceeding their peak.
    left = budget - int((slot * cnt).sum())
    for k in np.argsort(-slot):
        add = min(int(d.peak[k] - cnt[k]), left // int(slot[k]))
        cnt[k] += add
        left -= add * int(slot[k])
    return Allocation(d.sizes, np.arange(len(d.sizes)), np.maximum(cnt, 1))


def unlimited_allocation(g: Graph, order: Sequence[int]) -> Allocation:
    """Enough objects of every size that nothing is ever evicted (the ideal baseline)."""
    d = size_demand(g, order)
    return Allocation(d.sizes, np.arange(len(d.sizes)), np.maximum(d.peak, 1))
