"""Topological orders of a graph's nodes (schedules)."""
from __future__ import annotations

import heapq

import numpy as np

from .ir import Graph


def random_order(g: Graph, rng: np.random.Generator) -> list[int]:
    """A uniformly random choice among ready nodes at every step: a random topological order."""
    indeg = np.array([len(g.predecessors(n)) for n in range(len(g.nodes))], dtype=np.int64)
    succ = [g.successors(n) for n in range(len(g.nodes))]
    ready = [int(n) for n in np.nonzero(indeg == 0)[0]]
    order = []
    while ready:
        i = int(rng.integers(len(ready)))
        ready[i], ready[-1] = ready[-1], ready[i]
        n = ready.pop()
        order.append(n)
        for s in succ[n]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return order


def priority_order(g: Graph, priority) -> list[int]:
    """The topological order that always runs the ready node of smallest ``priority[node]``."""
    indeg = [len(g.predecessors(n)) for n in range(len(g.nodes))]
    heap = [(priority[n], n) for n in range(len(g.nodes)) if indeg[n] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, n = heapq.heappop(heap)
        order.append(n)
        for s in g.successors(n):
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, (priority[s], s))
    return order
