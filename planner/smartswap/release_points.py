"""Release points (004 Section 5.2): a swapped-out stay's bytes go back to the pool once the
plan says its copy has finished, instead of at the next synchronization.

The layer simulator (``layer_simulator``) places each copy in a layer with time left, but it
takes candidates by score, not in the order the copy streams run them, and a link-bound
stretch (an optimizer step: little compute, every state tensor in and out) has no layer with
time left at all. A swap-out then still queued behind others would hand its bytes to the next
swap-in, which waits for it: the two link directions take turns instead of overlapping.
``queued_releases`` therefore also runs the stays through the two copy queues in program order
(Eq. 1's time per operator, Eq. 3's time per copy, a step waiting for its swap-ins) and moves a
release point to the step during which that copy really finishes, as far as the pool allows.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .layer_simulator import swap_seconds
from .stays import Stay


def _queued_steps(stays: list[Stay], n: int, op_seconds: float, bw_in: float, bw_out: float, latency_s: float):
    """(stay, step during which its swap-out finishes) for each copied-out stay whose copy
    finishes after its release point, in the order of the swap-outs; never past the step
    before the storage's next stay."""
    ins_at: dict[int, list[Stay]] = {}
    outs_at: dict[int, list[Stay]] = {}
    for st in sorted(stays, key=lambda st: st.first_use):   # the Program's order at one step
        if st.start >= 0 and st.swap_in is not None:
            ins_at.setdefault(st.start, []).append(st)
        if st.out_after is not None and st.copy_out:
            outs_at.setdefault(st.out_after, []).append(st)
    arrive: dict[int, float] = {}        # step -> when its last swap-in has arrived
    end = np.empty(n)
    finish: dict[int, float] = {}
    t = in_free = out_free = 0.0
    for s in range(n):
        for st in ins_at.get(s, ()):
            in_free = max(t, in_free) + swap_seconds(st.nbytes, bw_in, latency_s)
            arrive[st.first_use] = max(arrive.get(st.first_use, 0.0), in_free)
        t = max(t, arrive.get(s, 0.0)) + op_seconds
        end[s] = t
        for st in outs_at.get(s, ()):
            out_free = max(t, out_free) + swap_seconds(st.nbytes, bw_out, latency_s)
            finish[id(st)] = out_free
    next_start: dict[int, int] = {}
    by_storage: dict[int, list[Stay]] = {}
    for st in stays:
        by_storage.setdefault(id(st.storage), []).append(st)
    for group in by_storage.values():
        group.sort(key=lambda st: st.start)
        for x, y in zip(group, group[1:]):
            next_start[id(x)] = y.start
    out = []
    for st in sorted((st for st in stays if id(st) in finish), key=lambda st: st.out_after):
        r = min(int(np.searchsorted(end, finish[id(st)])), n - 1, next_start.get(id(st), n) - 1)
        if r > st.free_after:
            out.append((st, r))
    return out


def held_bytes(stays: list[Stay], n: int) -> np.ndarray:
    """Per step, the bytes the stays hold (requested sizes)."""
    h = np.zeros(n + 2, dtype=np.int64)
    for st in stays:
        h[max(st.start, 0)] += st.nbytes
        h[min(st.free_after, n) + 1] -= st.nbytes
    return np.cumsum(h)[:n]


def queued_releases(stays: list[Stay], n: int, op_seconds: float, bw_in: float, bw_out: float,
                    limit: int, latency_s: float = 0.0) -> None:
    """Move release points later, to where the copy queues say each swap-out finishes, while
    the bytes held stay within ``limit`` (a release is moved as far as that allows)."""
    held = held_bytes(stays, n)
    for st, r in _queued_steps(stays, n, op_seconds, bw_in, bw_out, latency_s):
        over = np.nonzero(held[st.free_after + 1:r + 1] + st.nbytes > limit)[0]
        if len(over):
            r = st.free_after + int(over[0])
        held[st.free_after + 1:r + 1] += st.nbytes
        st.free_after = r


def queued_extra(stays: list[Stay], n: int, op_seconds: float, bw_in: float, bw_out: float,
                 latency_s: float = 0.0) -> np.ndarray:
    """Per step, the bytes that releasing where the copy queues say would hold beyond the
    release points of ``stays`` (which are left unchanged)."""
    h = np.zeros(n + 2, dtype=np.int64)
    for st, r in _queued_steps(stays, n, op_seconds, bw_in, bw_out, latency_s):
        h[st.free_after + 1] += st.nbytes
        h[r + 1] -= st.nbytes
    return np.cumsum(h)[:n]


@dataclass(frozen=True)
class ReleaseReport:
    """004 Section 5.2 / Figure 6b for one plan: per copied-out stay, the operators between its
    swap-out's issue and the reuse of its bytes, at the plan's release points and when waiting
    for the next synchronization (the iteration's end); the pool each way needs."""
    simulator: np.ndarray
    at_sync: np.ndarray
    arena_bytes: int
    arena_bytes_at_sync: int


def release_report(plan) -> ReleaseReport:
    """Of a ``SmartSwapPlan`` after ``make()``."""
    ours = [st for st in plan.stays_for(plan.stores, queued=plan.queued) if st.copy_out]
    sync = [st for st in plan.stays_for(plan.stores, release_at_sync=True) if st.copy_out]
    return ReleaseReport(np.array([st.free_after - st.out_after for st in ours], dtype=np.int64),
                         np.array([st.free_after - st.out_after for st in sync], dtype=np.int64),
                         plan.arena_needed(False), plan.arena_needed(True))
