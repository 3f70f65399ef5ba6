"""Topological orders of a graph's nodes (schedules), and the edges every schedule keeps.

Besides its data edges, a schedule keeps write-after-read edges: a node that may write
an output over one of its inputs (``Op.inplace``: an SGD update, a batch norm's
running statistics, a gradient accumulation) runs after every other reader of that
input, so the in-place write is always possible. The planner would be correct without
them (it then gives the output an object of its own), but schedules that break them
need more memory for nothing. The genetic search (ga/context.py) keeps them too.
"""
from __future__ import annotations

import heapq

import numpy as np


from .inplace import in_place_pairs
from .ir import Graph, GraphError


def write_after_read_edges(g: Graph) -> list[tuple[int, int]]:
    """(reader, updater) for every node reading a value that another node may write over."""
    edges = []
    for node in g.nodes:
        for _, src in in_place_pairs(node):
            cur = node.inputs[src]
            edges.extend((r, node.id) for r in g.users[cur] if r != node.id)
    return edges


def schedule_successors(g: Graph) -> list[list[int]]:
    """Per node, the nodes that must run after it: data edges plus write-after-read edges."""
    successors = [list(g.successors(n)) for n in range(len(g.nodes))]
    for reader, update in write_after_read_edges(g):
        if update not in successors[reader]:
            successors[reader].append(update)
    return successors


def _in_degrees(successors: list[list[int]]) -> list[int]:
    indeg = [0] * len(successors)
    for succ in successors:
        for s in succ:
            indeg[s] += 1
    return indeg


def _complete(g: Graph, order: list[int]) -> list[int]:
    if len(order) != len(g.nodes):
        raise GraphError("the write-after-read edges of in-place updates form a cycle with the data edges")
    return order


def random_order(g: Graph, rng: np.random.Generator) -> list[int]:
    """A uniformly random choice among ready nodes at every step: a random topological order."""
    succ = schedule_successors(g)
    indeg = _in_degrees(succ)
    ready = [n for n, d in enumerate(indeg) if d == 0]
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
    return _complete(g, order)


def priority_order(g: Graph, priority) -> list[int]:
    """The topological order that always runs the ready node of smallest ``priority[node]``."""
    succ = schedule_successors(g)
    indeg = _in_degrees(succ)
    heap = [(priority[n], n) for n in range(len(g.nodes)) if indeg[n] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, n = heapq.heappop(heap)
        order.append(n)
        for s in succ[n]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, (priority[s], s))
    return _complete(g, order)
