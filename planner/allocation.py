"""Size-class allocations derived from a graph's demand: the minimal one, the simple (default)
one, the unlimited one.

An operator runs only if its inputs and outputs are all resident at once, so
each size class needs at least as many objects as any one operator uses of
that class (an updated state reuses its old value's object, so it needs none).
The minimal allocation is the cheapest grouping of the sorted sizes into classes
under that rule, found by dynamic programming over class boundaries; the smallest
budget (``GraphFacts.smallest_budget``) is its bytes plus operator scratch.
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np

from allocator import Allocation, aligned_bytes
from engine.ir import Kind, PERSISTENT_KINDS
from engine.profile import Profile
from engine.units import format_bytes

from .errors import OutOfRoom
from .facts_memo import memo

if TYPE_CHECKING:       # type names only: planner.facts imports this module (minimal_allocation)
    from .budget import Budget
    from .facts import GraphFacts, SizeDemand

# A leaf stays in the working set between two reads when the compute between them is
# shorter than this many round trips of its bytes over the link (working_set).
KEEP_READS = 10.0
# A size class holds sizes down to 1/MAX_SPREAD of its slot, or any size if the slot is at
# most SMALL_SLOT bytes: a small tensor in a much larger slot takes a large tensor's place.
MAX_SPREAD = 4.0
SMALL_SLOT = 2**20
# The smallest sizes, as many as take at most this share of the pool at their peaks, get every
# object their peaks need (_small_class_floor).
SMALL_SHARE = 0.01
# Sizes whose copy is mostly the link's latency (at most latency x bandwidth bytes) get every
# object their peaks need while they take at most this share of the pool (_small_class_floor).
LATENCY_SHARE = 0.05
# The chunked allocation's classes below a chunk take at most this share of the pool (beyond
# what one operator needs): with large chunks, sizes just below one can have peaks that would
# leave the chunks little (BRNN-4-8K, analytic V100, 16 GiB, 8 MiB chunks: 7.9 GiB below a
# chunk and 22.0 s per iteration uncapped, 19.5 s capped).
SMALL_REGION = 0.25


# What the simple and chunked allocations derive from a graph's facts and no budget changes is kept
# per GraphFacts (planner/facts_memo.py), by what each depends on: a budget ladder or checkpoint's
# segmentations allocate one graph at many budgets (NasNet-25 under checkpoint: 784 allocations, 147
# of its 462 CPU-s, before). Only tables of sizes are kept, never [size, step] arrays (tens of MB).


def _digest(a: np.ndarray | None):
    """A key for an array argument: its dtype, shape and bytes' digest (None stays None)."""
    if a is None:
        return None
    a = np.ascontiguousarray(a)
    return a.dtype.str, a.shape, hashlib.blake2b(a.tobytes(), digest_size=16).digest()


def _class_needs(d: SizeDemand) -> np.ndarray:
    """need[i, j]: objects a class of sizes i..j needs so that every operator can run."""
    s = len(d.sizes)
    cum = np.concatenate([np.zeros((d.per_node.shape[0], 1), np.int64), np.cumsum(d.per_node, axis=1)], axis=1)
    need = np.zeros((s, s), dtype=np.int64)
    for i in range(s):
        need[i, i:] = np.maximum((cum[:, i + 1:] - cum[:, [i]]).max(axis=0, initial=0), 1)
    return need


def working_set(facts: GraphFacts, step_seconds: np.ndarray | None = None,
                link_bytes_per_s: float | None = None, resident_state: bool = False,
                firm: np.ndarray | None = None) -> np.ndarray:
    """[size, step]: tensors of each size that a plan should keep on the device at each step.
    Activations and gradients from their first write to their last use (moving them costs a
    copy each way). Leaves (inputs, labels, parameters, optimizer state) have a current host
    copy, so evicting them moves nothing: they count at the steps that read them, and between
    two reads only if the compute between them is shorter than KEEP_READS round trips of the
    link (without op times and a link: reads in consecutive steps). With ``resident_state``,
    state nothing updates (a forward-only graph's weights) also counts from its last read
    around the iteration's end to its first read: what keeping it resident across iterations
    takes. With ``firm`` (a tensor mask), what a plan that copies nothing out must hold: of
    the non-leaves only the firm ones count, and state that is updated counts from the
    iteration's start to its storage's end (its next value, with no host copy, stays resident
    into the next iteration: ``planner.swap_planner``'s double pass)."""
    g, order, d = facts.graph, facts.order, facts.demand
    lt = facts.lifetimes
    n_steps = max(1, len(order))
    counted, end = lt.storage()
    leaf = np.zeros(len(g.tensors), dtype=bool)
    leaf[g.leaves(Kind.INPUT, Kind.LABEL, *PERSISTENT_KINDS)] = True
    spans = np.nonzero(counted & ~leaf & (True if firm is None else firm))[0]
    starts, ends, idx = [lt.start[spans]], [end[spans]], [d.size_index[spans]]
    if firm is not None:     # updated state: resident from the iteration's start to its storage's end
        updated = np.array(sorted({cur for cur, nxt in g.state_pairs if cur != nxt}), dtype=np.int64)
        starts.append(np.zeros(len(updated), dtype=np.int64))
        ends.append(end[updated])
        idx.append(d.size_index[updated])
    if step_seconds is None or not link_bytes_per_s:
        clock, reach = np.arange(n_steps + 1, dtype=float), np.full(len(g.tensors), 1.0)
    else:
        clock = np.concatenate(([0.0], np.cumsum(step_seconds)))
        reach = KEEP_READS * 2 * np.array([t.nbytes for t in g.tensors], dtype=float) / link_bytes_per_s
    last = np.full(len(g.tensors), -1, dtype=np.int64)
    a, b, k = [], [], []
    for step, nid in enumerate(order):
        for t in dict.fromkeys(g.nodes[nid].inputs):
            if leaf[t]:
                prev = last[t]
                keep = prev >= 0 and clock[step] - clock[prev + 1] <= reach[t]
                a.append(prev + 1 if keep else step)
                b.append(step)
                k.append(d.size_index[t])
                last[t] = step
    unchanged = [cur for cur, nxt in g.state_pairs if cur == nxt and last[cur] >= 0] if resident_state else []
    first = {}
    for step, nid in enumerate(order if unchanged else ()):
        for t in g.nodes[nid].inputs:
            first.setdefault(t, step)
    for cur in unchanged:
        for lo, hi in ((last[cur] + 1, n_steps - 1), (0, first[cur] - 1)):
            if lo <= hi:
                a.append(lo)
                b.append(hi)
                k.append(d.size_index[cur])
    starts.append(np.asarray(a, dtype=np.int64))
    ends.append(np.asarray(b, dtype=np.int64))
    idx.append(np.asarray(k, dtype=np.int64))
    start, stop, size = (np.concatenate(x) for x in (starts, ends, idx))
    live = np.zeros((len(d.sizes), n_steps + 1), dtype=np.int64)
    np.add.at(live, (size, start), 1)
    np.add.at(live, (size, stop + 1), -1)
    return np.cumsum(live, axis=1)[:, :n_steps]


def _class_peaks(d: SizeDemand, live: np.ndarray) -> np.ndarray:
    """peak[i, j]: most tensors of sizes i..j in ``live`` ([size, step]) at once."""
    s = len(d.sizes)
    cum = np.concatenate([np.zeros((1, live.shape[1]), np.int64), np.cumsum(live, axis=0, dtype=np.int64)])
    peak = np.zeros((s, s), dtype=np.int64)
    for i in range(s):
        peak[i, i:] = (cum[i + 1:] - cum[i]).max(axis=1, initial=0)
    return peak


def _cheapest_runs(slot: np.ndarray, count: np.ndarray, allowed: np.ndarray | None = None
                   ) -> tuple[float, list[tuple[int, int]]]:
    """Group the sorted sizes into runs of consecutive sizes (object = the run's largest
    size) of fewest bytes, a run i..j costing slot[j] * count[i, j]; exact, by dynamic
    programming over run ends. Returns (bytes, [(first, end) of each run])."""
    s = len(slot)
    best = np.full(s + 1, np.inf)
    best[0] = 0
    cut = np.zeros(s + 1, dtype=np.int64)
    cost = slot[None, :].astype(float) * count
    if allowed is not None:
        cost = np.where(allowed, cost, np.inf)
    for j in range(1, s + 1):
        costs = best[:j] + cost[np.arange(j), j - 1]
        cut[j] = int(np.argmin(costs))
        best[j] = costs[cut[j]]
    runs, j = [], s
    while j > 0:
        runs.append((int(cut[j]), j))
        j = int(cut[j])
    runs.reverse()
    return float(best[s]), runs


def _allocation_of_runs(d: SizeDemand, runs, count: np.ndarray) -> Allocation:
    cls = np.concatenate([np.full(b - a, k) for k, (a, b) in enumerate(runs)])
    cnt = np.array([count[a, b - 1] for a, b in runs], dtype=np.int64)
    return Allocation(d.sizes, cls, cnt)


def minimal_allocation(d: SizeDemand) -> Allocation:
    """The allocation of fewest bytes that can run every operator: classes are runs of
    consecutive sizes, each with as many objects as any one operator needs from the run."""
    need = _class_needs(d)
    _, runs = _cheapest_runs(aligned_bytes(d.sizes), need)
    return _allocation_of_runs(d, runs, need)


def simple_allocation(facts: GraphFacts, budget: Budget, profile: Profile | None = None,
                      node_seconds: np.ndarray | None = None, firm: np.ndarray | None = None) -> Allocation:
    """The default allocation (SwapAdvisor's search starts from it; without a search it is
    the plan's): every class gets the same fraction f of its peak working set (``working_set``;
    at least what one operator needs), f as large as the budget's pool allows, with the sizes
    grouped, at that f, into the classes of fewest bytes whose slots are at most MAX_SPREAD
    times their smallest size (else, in a pool too small for that, any grouping). What the
    pool has left after rounding goes to the largest classes, up to their peak; then the
    largest class takes one more object from the class with the most to spare
    (``_one_more_for_the_largest``). A pool that
    holds every size's peak gets the unlimited allocation. Weights of a forward-only graph
    count as resident across iterations (``working_set(resident_state=True)``). ``profile``
    (op times, ``node_seconds`` if precomputed, and link) decides which leaves stay in the
    working set between reads (without one, only reads in consecutive steps) and which small
    sizes cost mostly latency to copy (``_small_class_floor``). With ``firm`` (a tensor mask: a
    plan that copies nothing out, ``planner.policies.checkpoint``), each class first gets what
    the firm tensors hold at its peak (``working_set(firm=)``) plus one operator's room to
    recompute in, then the fraction f of the rest of its peak; the result may exceed the pool
    (the caller refuses it)."""
    d = facts.demand
    pool = budget.pool_bytes
    unlimited = unlimited_allocation(facts)
    if unlimited.pool_bytes <= pool:
        return unlimited
    slot = aligned_bytes(d.sizes)
    need = memo(facts, ("needs",), lambda: _class_needs(d))
    step_seconds, link = _step_seconds_and_link(facts, profile, node_seconds)
    timing = (_digest(step_seconds), link)
    # State nothing updates (a forward-only graph's weights) counts as staying resident.
    peak = np.maximum(memo(facts, ("class peaks", *timing), lambda: _class_peaks(
        d, working_set(facts, step_seconds, link, resident_state=True))), need)

    latency_bytes = profile.link.latency_s * profile.link.h2d_bytes_per_s if profile is not None else 0.0
    base = np.zeros_like(peak)
    if firm is not None:    # what cannot leave, always; a fraction of the rest (room to recompute it)
        base = memo(facts, ("firm class peaks", *timing, _digest(firm)), lambda: _class_peaks(
            d, working_set(facts, step_seconds, link, firm=firm))) + need
        need = base
        peak = np.maximum(peak, base)
    floor = np.maximum(need, _small_class_floor(d, slot, pool, latency_bytes))
    if _cheapest_runs(slot, floor, None)[0] > pool:   # near the smallest budget: no room for those peaks
        floor = need

    def counts(f: float) -> np.ndarray:
        return np.maximum(floor, base + np.ceil(f * (peak - base) - 1e-9).astype(np.int64))

    def fits(f: float, allowed) -> bool:
        return _cheapest_runs(slot, counts(f), allowed)[0] <= pool

    spread_ok = (slot[None, :] <= MAX_SPREAD * d.sizes[:, None]) | (slot[None, :] <= SMALL_SLOT)
    allowed = spread_ok if fits(0.0, spread_ok) else None
    lo, hi = 0.0, 1.0
    if fits(hi, allowed):
        lo = hi
    else:
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if fits(mid, allowed) else (lo, mid)
    _, runs = _cheapest_runs(slot, counts(lo), allowed)
    grown = _grow(_allocation_of_runs(d, runs, counts(lo)), peak, runs, pool)
    return _one_more_for_the_largest(grown, need, peak, runs)


def _step_seconds_and_link(facts: GraphFacts, profile: Profile | None, node_seconds) -> tuple:
    """The op seconds of each step and the link's rate in (working_set's timing), or Nones."""
    if profile is None:
        return None, None
    secs = profile.node_seconds(facts.graph) if node_seconds is None else np.asarray(node_seconds)
    return secs[np.asarray(facts.order, dtype=np.int64)], profile.link.h2d_bytes_per_s


def _small_class_floor(d: SizeDemand, slot: np.ndarray, pool: int, latency_bytes: float = 0.0) -> np.ndarray:
    """floor[i, j]: for a class of sizes i..j among the smallest sizes, the sum of its sizes'
    peaks in the unlimited run (0 for other classes). The smallest sizes are those that, all at
    their peaks, take at most SMALL_SHARE of the pool, or LATENCY_SHARE while each slot is at
    most ``latency_bytes`` (the link's latency times its rate: such a copy is mostly latency, so
    streaming one costs far more than its bytes; ResNet-152 inference, batch 1, 64 MiB, analytic
    V100: 289 batch-norm parameters in 63 objects of 4 KiB, 677 swap-ins and 24.7 ms a batch,
    then 141 and 19.0 ms). Small tensors (a batch norm's
    statistics, biases, small activations) cost the pool next to nothing, but at the uniform
    fraction their classes have few objects, and the swap-in of one waits for an object while
    compute waits for it (Inception-4, analytic V100, 16 GiB: 0.19 s of the in-stream's idle
    time after the loss, in two classes of 20 KB objects, before this floor)."""
    s = len(d.sizes)
    taken = np.cumsum(slot * d.peak)
    is_small = (taken <= SMALL_SHARE * pool) | ((slot <= latency_bytes) & (taken <= LATENCY_SHARE * pool))
    cum = np.concatenate(([0], np.cumsum(d.peak)))
    floor = cum[None, 1:] - cum[:s, None]
    return np.where(np.triu(np.ones((s, s), dtype=bool)) & is_small[None, :], floor, 0).astype(np.int64)


def _grow(alloc: Allocation, peak: np.ndarray, runs, pool: int) -> Allocation:
    """Add objects to a fitting allocation, largest classes first, up to each class's peak
    working set (``peak[first, last]`` of its run of sizes), while the pool allows."""
    cnt = alloc.cnt.copy()
    slot = alloc.class_slot_bytes
    left = pool - int((slot * cnt).sum())
    for k in np.argsort(-slot, kind="stable"):
        a, b = runs[k]
        add = max(0, min(int(peak[a, b - 1] - cnt[k]), left // int(slot[k])))
        cnt[k] += add
        left -= add * int(slot[k])
    return alloc.with_counts(cnt)


def _one_more_for_the_largest(alloc: Allocation, need: np.ndarray, peak: np.ndarray, runs) -> Allocation:
    """One more object for the class of the largest slot (below its peak working set), paid by
    the class with the most objects above what one operator needs, if it can pay. The largest
    class has the fewest objects and the longest copies: with every object in use, the swap-in
    of its next tensor waits for an object while compute waits for it; one object there to
    copy into ahead is worth more than the same bytes spread over many small ones. Analytic
    V100, 16 GiB, without the small sizes' floor: the five Table 1 models 112.6 -> 110.2 s on
    the default order, 104.3 -> 98.9 s with updates when ready."""
    cnt = alloc.cnt.copy()
    slot = alloc.class_slot_bytes.astype(np.int64)
    minimum = np.array([need[a, b - 1] for a, b in runs], dtype=np.int64)
    most = np.array([peak[a, b - 1] for a, b in runs], dtype=np.int64)
    big = int(np.argmax(slot))
    if cnt[big] >= most[big]:
        return alloc
    above = cnt - minimum
    above[big] = -1
    for donor in np.argsort(-above, kind="stable"):
        give = -(-int(slot[big]) // int(slot[donor]))
        if donor == big or above[donor] < give:
            continue
        cnt[big] += 1
        cnt[donor] -= give
        return alloc.with_counts(cnt)
    return alloc


def chunked_allocation(facts: GraphFacts, budget: Budget, chunk_bytes: int, profile: Profile | None = None,
                       node_seconds: np.ndarray | None = None, firm: np.ndarray | None = None) -> Allocation:
    """SwapAdvisor's allocation over chunks (``Allocation.chunk_bytes``; allocator ``va``): the
    sizes of at least a chunk share the chunk class, so the pool's bytes go wherever the plan
    needs them at each step rather than to classes whose peaks come at different times; each
    smaller size is a class of its own with its peak working set (``working_set``; at least
    what one operator needs), or the same fraction f of it for all of them when the pool cannot
    hold that beside the chunks the heaviest operator needs, or when it would take more than
    SMALL_REGION of the pool; every other byte of the pool is chunks. A pool that holds every
    size's peak gets the unlimited allocation (nothing swaps). OutOfRoom when even the least of both does not fit.
    With ``firm`` (as ``simple_allocation``'s), each smaller size first gets what the firm tensors
    hold at its peak plus one operator's room, and the chunks must hold the firm tensors' chunks
    at their peak beside the heaviest operator's."""
    d = facts.demand
    pool = budget.pool_bytes
    unlimited = unlimited_allocation(facts)
    if unlimited.pool_bytes <= pool:
        return unlimited
    sizes = d.sizes
    n_small = min(int(np.searchsorted(sizes, chunk_bytes)), len(sizes) - 1)   # the largest size is chunked
    cls = np.minimum(np.arange(len(sizes)), n_small)
    width = -(-sizes[n_small:] // chunk_bytes)
    chunks_needed = int((d.per_node[:, n_small:].astype(np.int64) @ width).max(initial=1))
    step_seconds, link = _step_seconds_and_link(facts, profile, node_seconds)
    timing = (_digest(step_seconds), link)
    size_peaks = memo(facts, ("size peaks", *timing), lambda: working_set(
        facts, step_seconds, link, resident_state=True).max(axis=1, initial=0))
    peak = np.maximum(size_peaks[:n_small], d.minimum[:n_small])
    need = np.maximum(d.minimum[:n_small], 1)
    base = np.zeros_like(need)
    if firm is not None:    # what cannot leave, always, beside room to recompute
        def firm_peaks():
            held = working_set(facts, step_seconds, link, firm=firm)
            return held[:n_small].max(axis=1, initial=0), int((width @ held[n_small:]).max(initial=0))
        held_small, held_chunks = memo(facts, ("firm size peaks", *timing, _digest(firm), int(chunk_bytes)),
                                        firm_peaks)
        base = need = held_small + need
        peak = np.maximum(peak, base)
        chunks_needed += held_chunks

    def allocation(f: float) -> Allocation:
        small = np.maximum(need, base + np.ceil(f * (peak - base) - 1e-9).astype(np.int64))
        probe = Allocation(sizes, cls, np.append(small, 1), chunk_bytes)
        return probe.with_counts(np.append(small, max(1, (pool - probe.chunks_offset) // chunk_bytes)))

    def fits(f: float) -> bool:
        alloc = allocation(f)
        small_ok = f == 0 or alloc.chunks_offset <= SMALL_REGION * pool
        return small_ok and alloc.pool_bytes <= pool and alloc.cnt[-1] >= chunks_needed

    if not fits(0.0):
        what = ("what cannot leave and the operator that needs the most" if firm is not None
                else "the operator that needs the most")
        raise OutOfRoom(f"a pool of {format_bytes(pool)} holds too few {format_bytes(chunk_bytes)} chunks for "
                        f"{what} ({chunks_needed}) beside the smaller tensors' objects: "
                        f"give more memory or a smaller chunk")
    lo, hi = 0.0, 1.0
    if fits(hi):
        lo = hi
    else:
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return allocation(lo)


def unlimited_allocation(facts: GraphFacts) -> Allocation:
    """Enough objects of every size that nothing is ever evicted (the ideal baseline)."""
    d = facts.demand
    return Allocation(d.sizes, np.arange(len(d.sizes)), np.maximum(d.peak, 1))
