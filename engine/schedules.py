"""Topological orders of a graph's nodes (schedules), and the edges every schedule keeps.

Besides its data edges, a schedule keeps write-after-read edges: a node that may write
an output over one of its inputs (``Op.inplace``: an SGD update, a batch norm's
running statistics, a gradient accumulation) runs after every other reader of that
input, so the in-place write is always possible. The planner would be correct without
them (it then gives the output an object of its own), but schedules that break them
need more memory for nothing. The genetic search (ga/context.py) keeps them too. Only
writes that some order can take impose them (``write_after_read_edges``), so the edges
never cycle with the data edges.
"""
from __future__ import annotations

import heapq
from typing import Any, Callable, Sequence

import numpy as np

from .inplace import InPlace
from .ir import Graph, GraphError, Kind
from .liveness import kept_mask


def write_after_read_edges(g: Graph) -> list[tuple[int, int]]:
    """(reader, updater) for every node reading a value that another node may write over, for
    the in-place writes some order can take (``engine.inplace``): eligible (the node reads the
    input once and it has the output's size), the input not kept past the iteration, and no
    reader of the input needing the updater's output (``c = a + accumulate(a, y)``: ``c`` must
    run after the update, so ``a`` never dies there). Writes are taken in node order and one
    whose edges would close a cycle with the data edges and the edges kept so far (two updates
    each of whose input is read by a descendant of the other) keeps none: every order still
    honours one of them, and a schedule always exists (the graph's own order among them)."""
    decl = InPlace.of(g)
    kept = kept_mask(g)
    writes = []                          # (updater, its input's other readers), in node order
    for node, src, ok in zip(decl.node.tolist(), decl.src.tolist(), decl.eligible.tolist()):
        readers = list(dict.fromkeys(r for r in g.users[src] if r != node))
        if ok and not kept[src] and readers:
            writes.append((node, readers))
    successors = [list(dict.fromkeys(g.successors(n))) for n in range(len(g.nodes))]
    every = [list(s) for s in successors]
    for u, readers in writes:
        for r in readers:
            every[r].append(u)
    ready: list[int] = []
    if len(kahn_order(every, in_degrees(every), ready.append, ready.pop)) == len(g.nodes):
        return [(r, u) for u, readers in writes for r in readers]      # no cycle: every write
    edges = []
    for u, readers in writes:
        if _reaches(successors, u, set(readers)):
            continue
        for r in readers:
            successors[r].append(u)
            edges.append((r, u))
    return edges


def _reaches(successors: Sequence[Sequence[int]], start: int, targets: set) -> bool:
    """Whether some node of ``targets`` can be reached from ``start`` along ``successors``."""
    seen, stack = {start}, [start]
    while stack:
        for s in successors[stack.pop()]:
            if s in targets:
                return True
            if s not in seen:
                seen.add(s)
                stack.append(s)
    return False


def schedule_successors(g: Graph) -> list[list[int]]:
    """Per node, the nodes that must run after it: data edges plus write-after-read edges."""
    successors = [list(g.successors(n)) for n in range(len(g.nodes))]
    for reader, update in write_after_read_edges(g):
        if update not in successors[reader]:
            successors[reader].append(update)
    return successors


def in_degrees(successors: Sequence[Sequence[int]]) -> list[int]:
    """Per node, how many successor lists name it (its predecessors, when each list names a
    successor once)."""
    indeg = [0] * len(successors)
    for succ in successors:
        for s in succ:
            indeg[s] += 1
    return indeg


def kahn_order(successors: Sequence[Sequence[int]], pending: list[int], push: Callable[[int], Any],
               pop: Callable[[], int]) -> list[int]:
    """Kahn's algorithm over successor lists, the ready set the caller's: every node whose
    ``pending`` count (its unrun predecessors; consumed) is 0 is ``push``ed, in ascending order
    at first, then as its last predecessor runs; ``pop`` removes and returns the node to run
    next. The order misses some nodes exactly when the edges have a cycle."""
    ready = 0
    for n, d in enumerate(pending):
        if d == 0:
            push(n)
            ready += 1
    order = []
    while ready:
        n = pop()
        ready -= 1
        order.append(n)
        for s in successors[n]:
            pending[s] -= 1
            if pending[s] == 0:
                push(s)
                ready += 1
    return order


def _schedule(g: Graph, push, pop) -> list[int]:
    succ = schedule_successors(g)
    order = kahn_order(succ, in_degrees(succ), push, pop)
    if len(order) != len(g.nodes):
        raise GraphError("the write-after-read edges of in-place updates form a cycle with the data edges")
    return order


def random_order(g: Graph, rng: np.random.Generator) -> list[int]:
    """A uniformly random choice among ready nodes at every step: a random topological order."""
    ready: list[int] = []

    def pop() -> int:
        i = int(rng.integers(len(ready)))
        ready[i], ready[-1] = ready[-1], ready[i]
        return ready.pop()
    return _schedule(g, ready.append, pop)


def updates_when_ready(g: Graph, kinds: Sequence[Kind] = (Kind.PARAMETER,)) -> list[int]:
    """Insertion order, except that each update of a persistent tensor of ``kinds`` (the node
    writing its next value) runs as soon as it can: after its gradient is complete and every
    other read of the tensor. Insertion order leaves every update after the whole backward
    pass. With every persistent kind, a gradient accumulator's add also runs as soon as its
    gradient is ready, as an eager framework's autograd accumulates into ``.grad``."""
    update = set()
    for cur, nxt in g.state_pairs:
        if g.tensors[cur].kind in kinds and g.producer[nxt] >= 0:
            update.add(g.producer[nxt])
    return priority_order(g, [-1 if n in update else n for n in range(len(g.nodes))])


def priority_order(g: Graph, priority) -> list[int]:
    """The topological order that always runs the ready node of smallest ``priority[node]``."""
    heap: list[tuple[Any, int]] = []
    return _schedule(g, lambda n: heapq.heappush(heap, (priority[n], n)), lambda: heapq.heappop(heap)[1])
