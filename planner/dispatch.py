"""The timing model of three streams sharing one link (and a fourth, the all-reduce's, on the
network between data-parallel ranks), and the dispatch loop that runs it.

One loop serves two callers:
- the simulator (``planner.simulate``): each stream runs its instructions in program order
  (a CUDA stream is in-order), so an instruction waits for its stream's previous one;
- the stream-ordering pass (``planner.stream_order``): a copy stream, when idle, starts the
  most urgent of its instructions whose dependencies have finished; the order it ends up
  using becomes the Program's stream order, which then replays this timeline exactly.

Timing: an instruction starts when its stream is idle and its dependencies have finished.
Compute takes the profile's time for its node. A copy takes the link's latency, then moves
its bytes at the one-way rate, or at half the duplex rate while a copy in the other
direction is moving bytes too; rates are re-evaluated whenever a copy starts or ends, so
partial overlap is charged exactly. An all-reduce (engine.program.ALLREDUCE) runs on its own
in-order stream over the profile's network, which it shares with nothing here: a ring over N
ranks, ``Network.ring_seconds`` of its bucket's bytes. Copies move on ``Profile.rank_link``: the
device's link, or its share of a host that several ranks share (``Profile.host``).

A stream that was idle waiting for another stream's instruction starts its instruction
``Profile.wake_s`` after that one finishes (the CPU backend's stream threads block on an event
and the OS wakes them tens of microseconds later; 0, nothing charged, on analytic and GPU
profiles). Only a real wait is charged: the stream idle, and a dependency on another stream
the last to finish.

Host timeline (opt-in, ``host_seconds``; off for every plan, search and table: their times stay
as they were): one host thread issues the instructions in program order, never waiting for the
device (an eager framework's asynchronous dispatch), issuing instruction i costs
``Profile.dispatch_s`` plus ``host_seconds[i]`` (e.g. the event queries PyTorch's recordStream makes
it do), and no instruction starts before the host has issued it. The profile's ``dispatch_s`` is
then the host's cost instead of being added to each instruction's device time. A host slower
than the device makes the iteration host-bound: its time is then the host's.

The loop is compiled (numba: the search runs it for every candidate) over a Program's
arrays (``planner.program_arrays``).
"""
from __future__ import annotations

import math

import numba
import numpy as np

from engine.ir import Graph
from engine.profile import Profile
from engine.errors import EngineError
from engine.program import ALLREDUCE, COMPUTE, SWAP_IN, SWAP_OUT, Program

from .first_compile import announced
from .program_arrays import ProgramArrays


class Deadlock(RuntimeError):
    pass


def run_streams(program: Program | ProgramArrays, g: Graph, profile: Profile, node_seconds: np.ndarray,
                priority: np.ndarray | None = None, in_order=(COMPUTE, SWAP_IN, SWAP_OUT),
                host_seconds: np.ndarray | None = None):
    """Run the Program's instructions on three streams. Streams in ``in_order`` run in
    program order; the others start, when idle, their ready instruction of least
    ``priority`` (ties: program order). ``host_seconds``: per instruction, the host's cost of
    issuing it beyond ``dispatch_s`` (the host timeline on); None: off. Returns (start, finish,
    dispatch order)."""
    arrays = program if isinstance(program, ProgramArrays) else ProgramArrays.of(program.instrs)
    nbytes = np.fromiter((t.nbytes for t in g.tensors), dtype=np.float64, count=len(g.tensors))
    reduce_s = None if isinstance(program, ProgramArrays) else allreduce_seconds(program, g, profile)
    return run_arrays(arrays, nbytes, np.asarray(node_seconds, dtype=np.float64), profile, priority, in_order,
                      reduce_s, host_seconds)


class HostCostError(EngineError, ValueError):
    """Host costs that are not one finite, non-negative number of seconds per instruction."""


def host_costs(host_seconds, n: int) -> np.ndarray:
    """``host_seconds`` checked as the host timeline's input: float64, one per instruction."""
    h = np.asarray(host_seconds, dtype=np.float64)
    if h.shape != (n,):
        raise HostCostError(f"host costs: {n} instructions need {n} host seconds, got shape {h.shape}")
    bad = np.flatnonzero(~np.isfinite(h) | (h < 0))
    if len(bad):
        raise HostCostError(f"host costs: instruction {int(bad[0])} has {h[bad[0]]} s; each must be finite and >= 0")
    return h


class NoNetwork(EngineError, ValueError):
    """A Program with all-reduces timed on a profile that has no network between ranks."""


def allreduce_seconds(program: Program, g: Graph, profile: Profile) -> np.ndarray | None:
    """Per instruction, the seconds of an all-reduce (its bucket's ring on the profile's network;
    0 for the others), or None when the Program has none."""
    if not any(ins.kind == ALLREDUCE for ins in program.instrs):
        return None
    if profile.network is None:
        raise NoNetwork(f"the plan all-reduces gradients across {program.ranks} ranks but profile "
                        f"'{profile.device}' has no network link to time them on; give it one (\"network\": "
                        "{\"bytes_per_s\": ..., \"latency_s\": ...})")
    out = np.zeros(len(program.instrs))
    for i, ins in enumerate(program.instrs):
        if ins.kind == ALLREDUCE:
            out[i] = profile.network.ring_seconds(sum(g.tensors[t].nbytes for t in ins.bucket), program.ranks)
    return out


_NO_REDUCTIONS = np.zeros(0)
_NO_HOST = np.zeros(0)


def run_arrays(a: ProgramArrays, tensor_bytes: np.ndarray, node_seconds: np.ndarray, profile: Profile,
               priority: np.ndarray | None = None, in_order=(COMPUTE, SWAP_IN, SWAP_OUT),
               reduce_seconds: np.ndarray | None = None, host_seconds: np.ndarray | None = None):
    """``run_streams`` on arrays (``tensor_bytes`` as float64, per tensor; ``reduce_seconds`` per
    instruction, an all-reduce's time, or None when there is none; ``host_seconds`` as
    ``run_streams``'s). The all-reduce stream is in order."""
    n = len(a)
    link = profile.rank_link          # this rank's share of a host several ranks share (Profile.host)
    key = np.arange(n, dtype=np.float64) if priority is None else np.asarray(priority, dtype=np.float64)
    ordered = np.zeros(4, dtype=np.bool_)
    ordered[list(in_order)] = True
    ordered[ALLREDUCE] = True
    # read only for all-reduces (kind 3): none on the search's path, so nothing is allocated per candidate
    fixed = _NO_REDUCTIONS if reduce_seconds is None else np.asarray(reduce_seconds, dtype=np.float64)
    # an empty array is the host timeline off (numba compiles one loop for both)
    host = _NO_HOST if host_seconds is None or n == 0 else host_costs(host_seconds, n)
    with announced(_dispatch, "the simulator"):
        start, finish, order, ok = _dispatch(
            a.kind, a.target, a.copy, a.dep_ptr, a.deps, tensor_bytes, node_seconds, float(profile.dispatch_s),
            float(link.latency_s), float(link.h2d_bytes_per_s), float(link.d2h_bytes_per_s),
            float(link.duplex_bytes_per_s) / 2, key, ordered, fixed, host, float(profile.wake_s))
    if not ok:
        raise Deadlock("simulation deadlocked: the program's edges contradict its stream order")
    return start, finish, order.tolist()


@numba.njit(cache=True)
def _heap_push(hk, hi, size, key, i):
    """Min-heap of (key, index) pairs in hk/hi; returns the new size."""
    c = size
    hk[c] = key
    hi[c] = i
    while c > 0:
        p = (c - 1) // 2
        if hk[p] < hk[c] or (hk[p] == hk[c] and hi[p] < hi[c]):
            break
        hk[p], hk[c] = hk[c], hk[p]
        hi[p], hi[c] = hi[c], hi[p]
        c = p
    return size + 1


@numba.njit(cache=True)
def _heap_pop(hk, hi, size):
    """Remove the least (key, index); returns (index, new size)."""
    top = hi[0]
    size -= 1
    hk[0] = hk[size]
    hi[0] = hi[size]
    c = 0
    while True:
        left = 2 * c + 1
        if left >= size:
            break
        m = left
        r = left + 1
        if r < size and (hk[r] < hk[left] or (hk[r] == hk[left] and hi[r] < hi[left])):
            m = r
        if hk[c] < hk[m] or (hk[c] == hk[m] and hi[c] < hi[m]):
            break
        hk[m], hk[c] = hk[c], hk[m]
        hi[m], hi[c] = hi[c], hi[m]
        c = m
    return top, size


@numba.njit(cache=True)
def _dispatch(kind, target, copy, dep_ptr, deps, tensor_bytes, node_seconds, dispatch_s, latency_s,
              h2d, d2h, half_duplex, key, ordered, fixed, host, wake_s):
    n = kind.shape[0]
    latency = np.zeros(n)
    work = np.empty(n)               # compute: seconds; copies: bytes
    waiting = np.zeros(n, dtype=np.int64)
    # Host timeline: issued[i], when the host has issued instruction i (each issue one more
    # dependency of its instruction); dispatch_s is then the host's, not the device's.
    host_on = host.shape[0] > 0
    issued = np.zeros(n)
    if host_on:
        acc = 0.0
        for i in range(n):
            acc += dispatch_s + host[i]
            issued[i] = acc
        dispatch_s = 0.0
    hnext = 0                        # the next instruction the host issues
    # Dependents in CSR: each instruction's dependencies, plus its stream predecessor when the
    # stream runs in order.
    count = np.zeros(n + 1, dtype=np.int64)
    prev = np.full(4, -1, dtype=np.int64)
    for i in range(n):
        k = kind[i]
        if k == 0:
            work[i] = node_seconds[target[i]] + dispatch_s
        elif k == 3:                 # an all-reduce: its ring's seconds, at rate 1
            work[i] = fixed[i] + dispatch_s
        elif copy[i]:
            work[i] = tensor_bytes[target[i]]
            latency[i] = latency_s + dispatch_s
        else:
            work[i] = 0.0
        for e in range(dep_ptr[i], dep_ptr[i + 1]):
            count[deps[e] + 1] += 1
        waiting[i] = dep_ptr[i + 1] - dep_ptr[i]
        if ordered[k]:
            if prev[k] >= 0:
                count[prev[k] + 1] += 1
                waiting[i] += 1
            prev[k] = i
        if host_on:
            waiting[i] += 1
    ptr = np.cumsum(count)
    fill = ptr[:-1].copy()
    dependents = np.empty(ptr[n], dtype=np.int64)
    prev[:] = -1
    for i in range(n):
        for e in range(dep_ptr[i], dep_ptr[i + 1]):
            d = deps[e]
            dependents[fill[d]] = i
            fill[d] += 1
        k = kind[i]
        if ordered[k]:
            if prev[k] >= 0:
                dependents[fill[prev[k]]] = i
                fill[prev[k]] += 1
            prev[k] = i
    hk = np.empty((4, n))
    hi = np.empty((4, n), dtype=np.int64)
    hsize = np.zeros(4, dtype=np.int64)
    for i in range(n):
        if waiting[i] == 0:
            k = kind[i]
            hsize[k] = _heap_push(hk[k], hi[k], hsize[k], key[i], i)
    start = np.full(n, np.nan)
    finish = np.full(n, np.inf)
    order = np.empty(n, dtype=np.int64)
    n_order = 0
    running = np.full(4, -1, dtype=np.int64)
    # Wake-ups: when each instruction's last dependency on another stream finished, and when
    # each stream last went idle (an instruction starting later than both waited for the former).
    # (Kept only where a wake-up costs something: the search's analytic profiles charge none.)
    wake_on = wake_s > 0
    woken_by = np.full(n if wake_on else 0, -1.0)
    idle_since = np.zeros(4)
    one_way = np.array([1.0, h2d, d2h, 1.0])
    rate = np.empty(4)
    now = 0.0
    done = 0
    while done < n:
        while host_on and hnext < n and issued[hnext] - now <= 1e-12 * now:
            waiting[hnext] -= 1
            if waiting[hnext] == 0:
                kh = kind[hnext]
                hsize[kh] = _heap_push(hk[kh], hi[kh], hsize[kh], key[hnext], hnext)
            hnext += 1
        for k in range(4):
            if running[k] < 0 and hsize[k] > 0:
                i, hsize[k] = _heap_pop(hk[k], hi[k], hsize[k])
                running[k] = i
                start[i] = now
                if wake_on and woken_by[i] == now and idle_since[k] < now:
                    latency[i] += wake_s
                order[n_order] = i
                n_order += 1
        if running[0] < 0 and running[1] < 0 and running[2] < 0 and running[3] < 0:
            if host_on and hnext < n:        # the device idles until the host issues more
                now = issued[hnext]
                continue
            return start, finish, order[:n_order], False
        rate[:] = one_way
        if (running[1] >= 0 and latency[running[1]] == 0
                and running[2] >= 0 and latency[running[2]] == 0):
            rate[1] = half_duplex
            rate[2] = half_duplex
        # Time until each running instruction finishes, or leaves its latency phase, at these
        # rates; dependencies only finish when something running does, so the soonest is next.
        dt = math.inf
        for k in range(4):
            i = running[k]
            if i >= 0:
                s = latency[i] if latency[i] > 0 else work[i] / rate[k]
                dt = min(dt, s)
        if host_on and hnext < n:            # the host's next issue may come first
            dt = min(dt, issued[hnext] - now)
        now += dt
        for k in range(4):
            i = running[k]
            if i < 0:
                continue
            s = latency[i] if latency[i] > 0 else work[i] / rate[k]
            hit = s <= dt * (1 + 1e-12)
            if latency[i] > 0:
                latency[i] = 0.0 if hit else latency[i] - dt
                hit = hit and work[i] == 0
            elif not hit:
                work[i] -= dt * rate[k]
            if hit:
                finish[i] = now
                running[k] = -1
                idle_since[k] = now
                done += 1
                for e in range(ptr[i], ptr[i + 1]):
                    j = dependents[e]
                    if wake_on and kind[j] != k:
                        woken_by[j] = now
                    waiting[j] -= 1
                    if waiting[j] == 0:
                        kj = kind[j]
                        hsize[kj] = _heap_push(hk[kj], hi[kj], hsize[kj], key[j], j)
    return start, finish, order, True
