"""What PyTorch's recordStream costs the host (004 Section 5.2 and Figure 6a).

With recordStream, a block swapped out on the copy stream goes back to the pool only when the
host sees the copy's event complete; until then every operator the host dispatches polls events
(the caching allocator's ``process_events``, called on each allocation). 004 says each dispatch
inside a block's reuse interval queries it, so the host's cost grows with the reuse intervals
(Figure 6b) and the run turns host-bound. SmartSwap's release points need no polling: the
simulator says when each copy has finished.

Here a block's reuse interval is the stay's steps ``(out_after, free_after]`` (``release_report``'s
measure, operators from the swap-out's issue to the release), and the host pays per compute step:

- ``PER_BLOCK``: one query for every block still pending at that step (004's account);
- ``FIFO``: the polling PyTorch's and torch_npu's allocators implement (``process_events`` in
  c10/cuda/CUDACachingAllocator.cpp and torch_npu/csrc/core/npu/NPUCachingAllocator.cpp): the
  events are a queue per stream, polled from the front, stopping at the first not ready; one
  query for each block released at that step (found complete) and one more while any stays
  pending (a single copy-out stream).

``host_seconds`` turns the counts into the simulator's per-instruction host costs
(``planner.simulate(..., host_seconds=...)``).
"""
from __future__ import annotations

import numpy as np

from engine.program import COMPUTE, Program

from .stays import Stay

PER_BLOCK, FIFO = "per-block", "fifo"
POLLING = (PER_BLOCK, FIFO)


def reuse_intervals(stays: list[Stay], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(swap-out step, release step) of each copied-out stay, releases within the iteration's ``n``
    steps (a release past the last step is at the next synchronization: the last step)."""
    out = [(st.out_after, min(st.free_after, n - 1)) for st in stays if st.copy_out and st.out_after is not None]
    a = np.array([x for x, _ in out], dtype=np.int64)
    r = np.array([y for _, y in out], dtype=np.int64)
    return a, r


def _pending(a: np.ndarray, r: np.ndarray, n: int) -> np.ndarray:
    """Per step, the intervals ``(a, r]`` that hold it."""
    keep = r > a
    d = np.zeros(n + 1, dtype=np.int64)
    np.add.at(d, a[keep] + 1, 1)
    np.add.at(d, r[keep] + 1, -1)
    return np.cumsum(d)[:n]


def pending_blocks(stays: list[Stay], n: int) -> np.ndarray:
    """Per step, the blocks whose reuse interval holds it (``out_after < step <= release``)."""
    return _pending(*reuse_intervals(stays, n), n)


def queries_per_step(stays: list[Stay], n: int, polling: str = PER_BLOCK) -> np.ndarray:
    """Per step, the event queries its dispatch makes under ``polling`` (``POLLING``)."""
    if polling not in POLLING:
        raise ValueError(f"polling must be one of {', '.join(POLLING)} (got '{polling}')")
    a, r = reuse_intervals(stays, n)
    pending = _pending(a, r, n)
    if polling == PER_BLOCK:
        return pending
    released = np.bincount(r[r > a], minlength=n)[:n]
    return released + (pending - released > 0)


def host_seconds(program: Program, queries: np.ndarray, query_s: float) -> np.ndarray:
    """Per instruction of ``program``: ``query_s`` times the queries of its step for the k-th
    compute of the schedule (step k), 0 for copies and recomputations."""
    steps = [i for i, ins in enumerate(program.instrs) if ins.kind == COMPUTE and not ins.recompute]
    if len(steps) != len(queries):
        raise ValueError(f"{len(queries)} steps of queries for a Program of {len(steps)} scheduled computes")
    out = np.zeros(len(program.instrs))
    out[steps] = np.asarray(queries, dtype=np.float64) * query_s
    return out
