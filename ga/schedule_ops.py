"""Schedule crossover and mutation (SwapAdvisor Section 5.2).

A schedule is a topological order of the graph's nodes, held as an int32 numpy array.

- ``crossover(sch1, sch2, point)``: Figure 4. Child 1 is the first ``point`` nodes of
  parent 2 followed by the remaining nodes in parent 1's order; child 2 the same with the
  parents' roles swapped. A prefix of a topological order is closed under predecessors and
  the rest keeps a topological order's relative order, so both children are topological.
- ``segment_crossover(sch1, sch2, a, b)`` (not in the paper): child 1 is sch1's order with the
  nodes of sch2[a:b] moved to sch1's position ``a`` in sch2's relative order (each as early as
  its predecessors allow), child 2 the same with the parents' roles swapped: a good stretch of
  one parent (a layer's steps, an update run early) goes into the other whole, where Figure 4
  only ever takes a prefix. A list scheduler over priorities, so both are topological.
- ``mutate(ctx, schedule, prob, rng)``: a dataflow scheduler over the ready set. At each
  step, with probability ``prob`` it runs a random ready node, otherwise the ready node that
  comes earliest in the input schedule. With ``prob = 0`` it returns the input unchanged;
  with ``prob = 1`` it draws a random topological order (``random_schedule``).

Both run in O(n log n) on plain lists: ``mutate`` is ``engine.schedules.kahn_order`` over the
``GraphContext``'s successor lists and predecessor counts, its ready set a heap keyed by
position in the parent (with lazy deletion) beside a swap-remove list for uniform choice.
"""
from __future__ import annotations

import heapq

import numpy as np

from engine.schedules import kahn_order

from .context import GraphContext


def crossover(sch1, sch2, point: int) -> tuple[np.ndarray, np.ndarray]:
    """Figure 4's two children of schedules ``sch1`` and ``sch2`` at crossover point ``point``
    (the length of the prefix taken from the other parent, 0 <= point <= n)."""
    a = np.asarray(sch1, dtype=np.int32)
    b = np.asarray(sch2, dtype=np.int32)
    if a.shape != b.shape:
        raise ValueError(f"schedules differ in length: {a.size} and {b.size}")
    if not 0 <= point <= a.size:
        raise ValueError(f"crossover point {point} is outside 0..{a.size}")
    return _prefix_then_rest(b, a, point), _prefix_then_rest(a, b, point)


def _prefix_then_rest(head_from: np.ndarray, rest_from: np.ndarray, point: int) -> np.ndarray:
    taken = np.zeros(head_from.size, dtype=bool)
    prefix = head_from[:point]
    taken[prefix] = True
    return np.concatenate((prefix, rest_from[~taken[rest_from]]))


def random_crossover(sch1, sch2, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``crossover`` at a point drawn uniformly from 1..n-1 (0 when n < 2)."""
    n = len(sch1)
    point = int(rng.integers(1, n)) if n > 1 else 0
    return crossover(sch1, sch2, point)


def segment_crossover(ctx: GraphContext, sch1, sch2, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    """The two children of ``sch1`` and ``sch2`` that take the other parent's segment [a, b)."""
    s1 = np.asarray(sch1, dtype=np.int64)
    s2 = np.asarray(sch2, dtype=np.int64)
    if s1.shape != s2.shape:
        raise ValueError(f"schedules differ in length: {s1.size} and {s2.size}")
    if not 0 <= a <= b <= s1.size:
        raise ValueError(f"segment [{a}, {b}) is outside 0..{s1.size}")
    return _with_segment(ctx, s1, s2[a:b], a), _with_segment(ctx, s2, s1[a:b], a)


def _with_segment(ctx: GraphContext, base: np.ndarray, segment: np.ndarray, at: int) -> np.ndarray:
    """``base``'s order, the ``segment``'s nodes ranked in its order just before position ``at``."""
    n = base.size
    priority = np.empty(n, dtype=np.float64)
    priority[base] = np.arange(n)
    priority[segment] = at - 1 + np.arange(1, segment.size + 1) / (segment.size + 1)
    prio = priority.tolist()
    heap: list[tuple[float, int]] = []
    return np.asarray(kahn_order(ctx.successors, list(ctx.pred_count),
                                 lambda v: heapq.heappush(heap, (prio[v], v)), lambda: heapq.heappop(heap)[1]),
                      dtype=np.int32)


def mutate(ctx: GraphContext, schedule, prob: float, rng: np.random.Generator) -> np.ndarray:
    """The mutated schedule: a dataflow scheduler that, at each step, runs a uniformly random
    ready node with probability ``prob``, else the ready node earliest in ``schedule``."""
    parent = np.asarray(schedule, dtype=np.int64)
    n = ctx.num_nodes
    if parent.size != n:
        raise ValueError(f"schedule has {parent.size} nodes; the graph has {n}")
    if prob <= 0:
        return parent.astype(np.int32)
    rank_of = np.empty(n, dtype=np.int64)
    rank_of[parent] = np.arange(n)
    rank = rank_of.tolist()
    node_at = parent.tolist()
    flips = (rng.random(n) < prob).tolist()
    picks = rng.random(n).tolist()
    steps = zip(flips, picks)
    ready: list[int] = []                     # uniform choice: swap-remove by slot
    slot = [-1] * n
    heap: list[int] = []                      # earliest in parent: ranks, lazily deleted
    done = [False] * n

    def push(v: int) -> None:
        slot[v] = len(ready)
        ready.append(v)
        heapq.heappush(heap, rank[v])

    def pop() -> int:
        flip, pick = next(steps)
        if flip:
            v = ready[int(pick * len(ready))]
        else:
            v = node_at[heapq.heappop(heap)]
            while done[v]:
                v = node_at[heapq.heappop(heap)]
        i, last = slot[v], ready.pop()
        if last != v:
            ready[i] = last
            slot[last] = i
        done[v] = True
        return v
    return np.asarray(kahn_order(ctx.successors, list(ctx.pred_count), push, pop), dtype=np.int32)


def random_schedule(ctx: GraphContext, rng: np.random.Generator) -> np.ndarray:
    """A random topological order: a uniformly random ready node at every step."""
    return mutate(ctx, np.arange(ctx.num_nodes), 1.0, rng)
