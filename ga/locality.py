"""The locality mutation: a schedule re-run through a list scheduler that keeps big tensors hot.

At every step the scheduler runs the ready node whose distinct inputs, counted in bytes, were
touched (read or written) within the last ``window`` steps; ties, and nodes with nothing hot,
go to the node earliest in the parent schedule. So a node that reuses a weight the previous
steps read runs before one that would bring another in: on an RNN the next time step of the
same layer (its weights hot) runs before the first step of another layer. A random
topological order of RNN-8-8K interleaves its eight layers, all of whose weights are then in
use at once, and the swap planner runs it at 0.15 of ideal; re-run through this scheduler,
0.35-0.65 (windows of 10-45 steps, two random orders). As a mutation of 1 in 5 schedule children it let
the search climb from an all-random first generation (the paper's setting) to 0.88 of ideal in
10 minutes on 2 cores, where without it 10 minutes reached 0.30
(bench/results/ga_search_10min_random_rnn*_2026-11-24.txt); seeded searches are within noise of
without it (ga_search_locality_ab_150s_2026-11-24.txt).

The window is drawn per child (``WINDOWS``): the best one depends on how many operators make
one layer's step, which the search does not know.
"""
from __future__ import annotations

import numba
import numpy as np

import planner.numba_cache  # noqa: F401  (its package registers one cache per user before the decorator below)

# Windows (steps) drawn uniformly per mutated child; measured on RNN-8-8K (about 16 operators
# per layer and time step) from random orders: 10-45 all help, none is best on every order.
WINDOWS = (8, 48)


def locality_order(ctx, schedule, window: int) -> np.ndarray:
    """``schedule`` re-run through the locality list scheduler with a hot window of ``window``
    steps (a topological order of ``ctx``'s graph, its write-after-read edges included). A
    context without tensors (``GraphContext.synthetic``) has nothing hot: the parent comes back."""
    parent = np.asarray(schedule, dtype=np.int64)
    if ctx.tensor_bytes.size == 0:
        return parent.astype(np.int32)
    rank = np.empty(ctx.num_nodes, dtype=np.int64)
    rank[parent] = np.arange(ctx.num_nodes)
    succ_ptr, succ, pred_count = ctx.dag_arrays()
    return _locality_order(rank, succ_ptr, succ, pred_count, ctx.input_ptr, ctx.inputs, ctx.output_ptr,
                           ctx.outputs, ctx.tensor_bytes, int(window))


@numba.njit(cache=True)
def _locality_order(rank, succ_ptr, succ, pred_count, input_ptr, inputs, output_ptr, outputs, tensor_bytes,
                    window):
    n = rank.shape[0]
    indeg = pred_count.copy()
    ready = np.empty(n, dtype=np.int64)       # swap-remove list
    r = 0
    for v in range(n):
        if indeg[v] == 0:
            ready[r] = v
            r += 1
    never = -(1 << 62)
    last = np.full(tensor_bytes.shape[0], never, dtype=np.int64)    # step each tensor was last touched
    out = np.empty(n, dtype=np.int32)
    for step in range(n):
        best, best_hot, best_rank = -1, -1.0, 0
        for i in range(r):
            v = ready[i]
            hot = 0.0
            for e in range(input_ptr[v], input_ptr[v + 1]):
                t = inputs[e]
                if step - last[t] <= window:
                    hot += tensor_bytes[t]
            if hot > best_hot or (hot == best_hot and rank[v] < best_rank):
                best, best_hot, best_rank = i, hot, rank[v]
        v = ready[best]
        r -= 1
        ready[best] = ready[r]
        out[step] = v
        for e in range(input_ptr[v], input_ptr[v + 1]):
            last[inputs[e]] = step
        for e in range(output_ptr[v], output_ptr[v + 1]):
            last[outputs[e]] = step
        for e in range(succ_ptr[v], succ_ptr[v + 1]):
            w = succ[e]
            indeg[w] -= 1
            if indeg[w] == 0:
                ready[r] = w
                r += 1
    return out
