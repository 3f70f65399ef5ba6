"""Lower bounds on one iteration's time for a (graph, order, budget, profile): no Program made
under that budget can be faster, whatever its allocation, eviction choices or copy order.

- compute: the compute stream runs every operator once (the profile's time plus the dispatch
  cost the simulator charges per instruction).
- peak: at step s, ``E(s) = live(s) - pool`` bytes must be off the device, taken from tensors
  step s does not touch (a weight nothing updates is live until its last read: ``bound_lifetimes``). A byte of a leaf (its host copy is current) or of a state's next
  value costs at least one copy, a byte of an activation or gradient two (out, then back
  in); every byte crosses the link at most at its fastest aggregate rate.
- persistent (order-independent): at most ``pool`` bytes of state stay resident between
  iterations, so the rest of the state read comes in, plus the batch, and the rest of the
  next values go out.
- split (order-specific, the tightest): at the start tau of step s the E(s) bytes are off the
  device. An activation or gradient among them finished its swap-out before tau and starts
  its swap-in after tau; a leaf needs only the swap-in after tau, a next value only the
  swap-out before tau. Before tau both the swap-out stream and the compute of steps < s ran;
  after it, the swap-in stream and the compute from s on. So
  ``T >= max(out / d2h, compute before s) + max(in / h2d, compute from s on)``, at the cheapest
  choice of which tensors are off, maximised over s.
- two splits (order-specific): the swap-outs forced at step s1 finish before its start tau1,
  the swap-ins forced at a later step s2 start after its start tau2, and the compute of steps
  s1..s2-1 runs between the two. So ``T >= max(out(s1) / d2h, compute before s1) + compute of
  s1..s2-1 + max(in(s2) / h2d, compute from s2 on)``, each with its own least cover, maximised
  over s1 <= s2: the forward's copies out that compute cannot hide plus the backward's copies
  in that compute cannot hide (one split charges only one of them where they peak apart).
- class (allocation-specific, ``class_bounds``): the split and two splits again, for plans
  that hold each tensor in an object of its own size class (the SwapAdvisor planner's): each
  class's live tensors beyond its objects are off the device even where other classes have
  room. Not part of ``Bounds``: it bounds only such plans, and it costs seconds on the largest
  graphs (NasNet-25: 4 s).
- recompute (``recompute_*``): the peak, split and two splits again for plans that may also
  recompute (``Instr.recompute``). A tensor off the device at step s either crosses the link as
  above or is recreated by running its producer again; that run is on the compute stream after
  step s (before it, the tensor would be on the device at s), so it adds to the compute from s
  on. Only produced tensors of recomputable producers (``engine.recompute``) qualify; leaves
  never do. A producer's run costs at least its profiled time and dispatch, and recreates all
  its outputs: charging each output byte ``cost / bytes of all its outputs``, fractionally, and
  each byte at the cheapest rate of its bucket (``RATE_BUCKETS``) only ever charges less than
  any set of whole producers costs, and enlarging the choices only lowers a minimum: a bound
  still. At step s, r bytes recreated at least cost ``R_s(r)`` (convex, piecewise linear: the
  cheapest bytes first), and the split is ``T >= min over r of [max(out / d2h, compute before s)
  + max(in / h2d, compute from s on + R_s(r))]`` with the rest of the excess covered as before;
  a linear program's value, so convex in r: its least is at one of the breakpoints, all of
  which are evaluated. The peak adds the recomputation to the compute instead of the link,
  ``T >= min over r of max(link bytes / both, compute + R_s(r))``; the two splits charge
  recomputation at s2 like the split and treat it as free at s1 (where it runs is not known).
  With nothing recomputable they equal the swap-only bounds; they are never above them.

Everything is numpy over steps and tensors: the paper's models take milliseconds.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from allocator import SizeClassLayout
from engine.ir import PERSISTENT_KINDS, Graph, Kind
from engine.liveness import Lifetimes, live_bytes_per_step
from engine.profile import Profile
from engine.recompute import recomputable_mask

from .budget import Budget
from .facts import GraphFacts

# Tensor classes by what keeping one off the device costs.
LEAF, NEXT_VALUE, ACTIVATION = 0, 1, 2      # one copy in; one copy out; out and back in


@dataclass(frozen=True)
class Bounds:
    compute_s: float
    peak_s: float
    persistent_s: float
    split_s: float
    split_step: int     # position in the order of the step whose split gives split_s; -1 when
                        # the pool holds every step's live bytes (then split_s is the compute)
    two_split_s: float = 0.0
    two_split_steps: tuple[int, int] = (-1, -1)     # (s1, s2) giving two_split_s; -1s as above
    # The same for plans that may also recompute (never above the swap-only ones).
    recompute_peak_s: float = 0.0
    recompute_split_s: float = 0.0
    recompute_split_step: int = -1
    recompute_two_split_s: float = 0.0

    @property
    def bound(self) -> float:
        """The bound for plans that only swap."""
        return max(self.compute_s, self.peak_s, self.persistent_s, self.split_s, self.two_split_s)

    @property
    def recompute_bound(self) -> float:
        """The bound for plans that may also recompute (persistent state is never recomputed)."""
        return max(self.compute_s, self.persistent_s, self.recompute_peak_s, self.recompute_split_s,
                   self.recompute_two_split_s)

    def to_json(self) -> dict:
        return dict(asdict(self), bound_s=self.bound, recompute_bound_s=self.recompute_bound)


@dataclass(frozen=True)
class StepBytes:
    """Per step of the order: bytes of storage live (an in-place chain once), and, per class
    (rows LEAF, NEXT_VALUE, ACTIVATION), bytes live but not touched by the step."""
    live: np.ndarray
    untouched: np.ndarray


def tensor_classes(g: Graph) -> np.ndarray:
    """LEAF for tensors no operator produces; NEXT_VALUE for the next values of persisted state
    (and the loss and outputs, read back after the iteration: off the device it needs only a swap-out);
    ACTIVATION for every other produced tensor (activations and gradients)."""
    cls = np.where(np.asarray(g.producer) < 0, LEAF, ACTIVATION).astype(np.int64)
    kept = [nxt for cur, nxt in g.state_pairs if nxt != cur] + g.read_back()
    cls[kept] = NEXT_VALUE
    return cls


def bound_lifetimes(facts: GraphFacts, touch: tuple[np.ndarray, np.ndarray] | None = None) -> Lifetimes:
    """The order's lifetimes as the bounds count them: state that is its own next value (a
    forward-only graph's weights) ends at its last read, not at the iteration's end. Past that
    read it may be off the device at no cost within the iteration (its host copy is current);
    charging its swap-in after a later step would overcharge a plan that evicts it there and
    does not keep it across iterations (the persistent bound counts what must come back).
    ``touch``: ``touched(graph, order)``, if already computed."""
    g, lt = facts.graph, facts.lifetimes
    same = np.array([cur for cur, nxt in g.state_pairs if cur == nxt], dtype=np.int64)
    if not len(same):
        return lt
    last_read = np.zeros(len(g.tensors), dtype=np.int64)
    steps, tensors = touched(g, facts.order) if touch is None else touch
    np.maximum.at(last_read, tensors, steps)
    end = lt.end.copy()
    end[same] = last_read[same]
    return Lifetimes(lt.start, end, lt.inplace_of)


def step_bytes(facts: GraphFacts, touch: tuple[np.ndarray, np.ndarray] | None = None) -> StepBytes:
    g, order = facts.graph, facts.order
    touch = touched(g, order) if touch is None else touch
    lt = bound_lifetimes(facts, touch)
    nbytes = np.array([t.nbytes for t in g.tensors], dtype=np.int64)
    untouched = untouched_bytes(tensor_classes(g), 3, nbytes, lt, touch, len(order))
    return StepBytes(live_bytes_per_step(g, order, lt), untouched)


def untouched_bytes(row: np.ndarray, n_rows: int, nbytes: np.ndarray, lt: Lifetimes,
                    touch: tuple[np.ndarray, np.ndarray], n_steps: int) -> np.ndarray:
    """(n_rows, n_steps): per step, the bytes live but not touched by the step of the tensors
    in each row (``row``: per tensor, its row, or -1 for none)."""
    # Each tensor over its own [start, end]: an in-place pair overlaps only at the step that
    # writes the output over the input, which touches both, so untouched bytes count it once.
    ids = np.nonzero(row >= 0)[0]
    diff = np.zeros((n_rows, n_steps + 1), dtype=np.int64)
    np.add.at(diff, (row[ids], lt.start[ids]), nbytes[ids])
    np.add.at(diff, (row[ids], lt.end[ids] + 1), -nbytes[ids])
    untouched = np.cumsum(diff[:, :-1], axis=1)
    steps, tensors = touch
    hit = row[tensors] >= 0
    np.subtract.at(untouched, (row[tensors[hit]], steps[hit]), nbytes[tensors[hit]])
    return untouched


def touched(g: Graph, order) -> tuple[np.ndarray, np.ndarray]:
    """(step, tensor) for every tensor a step reads or writes, each pair once."""
    steps, tensors = [], []
    for p, nid in enumerate(order):
        n = g.nodes[nid]
        ts = set(n.inputs)
        ts.update(n.outputs)
        steps.extend([p] * len(ts))
        tensors.extend(ts)
    return np.asarray(steps, dtype=np.int64), np.asarray(tensors, dtype=np.int64)


def step_seconds(facts: GraphFacts, profile: Profile, node_seconds: np.ndarray | None = None) -> np.ndarray:
    """Compute-stream seconds of each step, as the simulator charges them."""
    return node_compute_seconds(facts.graph, profile, node_seconds)[np.asarray(facts.order, dtype=np.int64)]


def lower_bounds(facts: GraphFacts, budget: Budget | None, profile: Profile,
                 node_seconds: np.ndarray | None = None) -> Bounds:
    """The bounds for ``facts.graph`` in ``facts.order`` under ``budget`` (None: unlimited
    memory) on ``profile`` (``node_seconds``: its op times, if already computed)."""
    pool = np.inf if budget is None else float(budget.pool_bytes)
    h2d, d2h, both = _link_rates(profile)

    node_cost = node_compute_seconds(facts.graph, profile, node_seconds)
    steps = node_cost[np.asarray(facts.order, dtype=np.int64)]
    compute = float(steps.sum())
    persistent = persistent_bound(facts.graph, pool, h2d, d2h, both)
    if not len(steps):
        return Bounds(compute, 0.0, persistent, compute, -1, compute, (-1, -1), compute, compute, -1, compute)
    touch = touched(facts.graph, facts.order)
    sb = step_bytes(facts, touch)
    excess = np.maximum(sb.live - pool, 0.0)                 # E(s)
    leaf, nxt, _ = sb.untouched.astype(float)
    one_copy = np.minimum(excess, leaf + nxt)                # leaves and next values first
    two_copies = excess - one_copy                           # the rest: activations and gradients
    peak = float(np.max(one_copy + 2 * two_copies)) / both

    before = np.concatenate(([0.0], np.cumsum(steps)[:-1]))  # compute finished when step s starts
    after = compute - before
    split = split_per_step(excess, leaf, nxt, before, after, h2d, d2h)
    s = int(np.argmax(split)) if excess.any() else -1
    two, steps_two = two_split(excess, leaf, nxt, before, after, h2d, d2h)

    cost = recompute_cost(facts, touch, node_cost)
    return Bounds(compute, peak, persistent, float(split[s]) if s >= 0 else compute, s, compute + two, steps_two,
                  *recompute_bounds(cost, excess, leaf, nxt, before, after, split, (h2d, d2h, both)))


def recompute_bounds(cost: RecomputeCost, excess, leaf, nxt, before, after, split,
                     rates: tuple[float, float, float]) -> tuple[float, float, int, float]:
    """(peak, split, its step, two splits) for plans that may also recompute, given the per-step
    swap-only ``split``; only the steps with an excess differ from the compute."""
    h2d, d2h, both = rates
    compute = float(after[0])
    hot = np.nonzero(excess > 0)[0]
    cost = cost.at(hot)
    e, lf, nx, b, a = excess[hot], leaf[hot], nxt[hot], before[hot], after[hot]
    rsplit = split.copy()                        # r = 0 is the swap-only cover: never above it
    rsplit[hot] = np.minimum(split[hot], recompute_split_per_step(e, lf, nx, b, a, h2d, d2h, cost))
    s = int(np.argmax(rsplit)) if len(hot) else -1
    late_out, late_in = np.zeros(len(excess)), np.zeros(len(excess))
    # Where a recomputation for step s1 runs is not known: free at s1, charged after s2.
    late_out[hot] = np.maximum(np.maximum(e - cost.total - lf, 0.0) / d2h - b, 0.0)
    late_in[hot] = recompute_late_in(e, nx, a, h2d, cost)
    return (float(np.max(recompute_peak_per_step(e, lf, nx, compute, both, cost), initial=compute)),
            float(rsplit[s]) if s >= 0 else compute, s, compute + _worst_pair(late_out, late_in)[0])


def node_compute_seconds(g: Graph, profile: Profile, node_seconds: np.ndarray | None = None) -> np.ndarray:
    """Per node, what the simulator charges the compute stream for running it (once, or again)."""
    secs = profile.node_seconds(g) if node_seconds is None else np.asarray(node_seconds, dtype=float)
    return secs + profile.dispatch_s


# Recomputed bytes are charged at the cheapest rate of their bucket: more buckets, closer to each
# producer's own rate, and more work per step (the bound is evaluated at ~4 points per bucket).
RATE_BUCKETS = 32


@dataclass(frozen=True)
class RecomputeCost:
    """Per step, the least compute seconds that recreate r of the bytes the step leaves
    untouched, R(r): convex and piecewise linear, the cheapest bytes first. Bucket k holds
    ``bytes[k]`` at ``rate[k]`` seconds per byte, rates ascending."""
    rate: np.ndarray        # (buckets,)
    bytes: np.ndarray       # (buckets, steps)

    def at(self, steps: np.ndarray) -> "RecomputeCost":
        return RecomputeCost(self.rate, self.bytes[:, steps])

    @property
    def total(self) -> np.ndarray:
        """Per step, every byte that may be recreated."""
        return self.bytes.sum(axis=0)

    def pieces(self) -> tuple[np.ndarray, np.ndarray]:
        """Per bucket and step, r where its linear piece begins and R there."""
        spent = self.bytes * self.rate[:, None]
        return np.cumsum(self.bytes, axis=0) - self.bytes, np.cumsum(spent, axis=0) - spent


def recompute_cost(facts: GraphFacts, touch: tuple[np.ndarray, np.ndarray], node_cost: np.ndarray,
                   buckets: int = RATE_BUCKETS) -> RecomputeCost:
    """The bytes each step leaves untouched that a recomputation could recreate: the outputs of
    recomputable producers (``engine.recompute``), each byte at its producer's cost over the
    bytes of all its outputs (one run recreates them all), bucketed by that rate."""
    g = facts.graph
    producer = np.asarray(g.producer, dtype=np.int64)
    nbytes = np.array([t.nbytes for t in g.tensors], dtype=np.int64)
    made = np.nonzero(producer >= 0)[0]
    out_bytes = np.zeros(len(g.nodes))
    np.add.at(out_bytes, producer[made], nbytes[made])
    can = made[recomputable_mask(g)[producer[made]] & (nbytes[made] > 0)]
    rate = node_cost[producer[can]] / out_bytes[producer[can]]
    unique = np.unique(rate)
    edges = unique if len(unique) <= buckets else np.quantile(unique, np.linspace(0, 1, buckets + 1))[:-1]
    row = np.full(len(g.tensors), -1, dtype=np.int64)
    row[can] = np.searchsorted(edges, rate, side="right") - 1
    cheapest = np.full(len(edges), np.inf)
    np.minimum.at(cheapest, row[can], rate)
    untouched = untouched_bytes(row, len(edges), nbytes, bound_lifetimes(facts, touch), touch, len(facts.order))
    used = np.isfinite(cheapest)                  # quantile edges may leave a bucket empty
    return RecomputeCost(cheapest[used], untouched[used].astype(float))


def _least_over_recompute(cost: RecomputeCost, cap: np.ndarray, seconds, meets, kinks) -> np.ndarray:
    """Per step, the least of ``seconds(r, R(r))`` over r in [0, cap], for a function convex in
    r and piecewise linear: its least is at a breakpoint, and every one is evaluated. They are
    the ends of R's pieces, the ``kinks`` (per step r), and within each piece where R meets a
    falling line ``level - slope * r`` (``meets``: (level per step, slope) pairs)."""
    start, spent = cost.pieces()
    rate = cost.rate[:, None]
    lo, hi = np.minimum(start, cap), np.minimum(start + cost.bytes, cap)
    outside = start > cap                          # a piece that begins past the cap
    candidates = [start, hi, *kinks]
    for level, slope in meets:
        speed = rate + slope
        candidates.append(np.divide(level - spent + rate * start, speed, out=start.copy(), where=speed > 0))
    none = np.zeros(len(cap))
    best = seconds(none, none)                     # nothing recreated (also where nothing may be)
    for r in candidates:
        r = np.clip(r, lo, hi)
        value = seconds(r, spent + rate * (r - start))
        best = np.minimum(best, np.where(outside, np.inf, value).min(axis=0, initial=np.inf))
    return best


def recompute_split_per_step(excess, leaf, nxt, before, after, h2d, d2h, cost: RecomputeCost) -> np.ndarray:
    """``split_per_step`` where r of the excess may be recreated after the step at R(r) compute
    seconds: the least over r of ``T1 + T2``, T1 >= before and the copies out, T2 >= after + R(r)
    and the copies in. With the rest, E' = excess - r, covered by leaves (in), next values (out)
    and activations (both): ``d2h T1 >= E' - leaf``, ``h2d T2 >= E' - nxt``, ``d2h T1 + h2d T2 >=
    E'``; from the least T1 and T2 the first two allow, the third's shortfall goes at the faster
    rate."""
    fastest = max(h2d, d2h)

    def seconds(r, spent):
        rest = excess - r
        t_out = np.maximum(before, (rest - leaf) / d2h)
        t_in = np.maximum(after + spent, (rest - nxt) / h2d)
        return t_out + t_in + np.maximum(rest - d2h * t_out - h2d * t_in, 0.0) / fastest

    meets = [((excess - nxt) / h2d - after, 1 / h2d),              # the copies in meet the compute
             ((excess - d2h * before) / h2d - after, 1 / h2d),     # the shortfall ends (T1 at before)
             (leaf / h2d - after, 0.0)]                            # the shortfall ends (T1 at the copies out)
    kinks = [excess - leaf - d2h * before, excess - leaf - nxt]
    return _least_over_recompute(cost, np.minimum(cost.total, excess), seconds, meets, kinks)


def recompute_peak_per_step(excess, leaf, nxt, compute: float, both: float, cost: RecomputeCost) -> np.ndarray:
    """Per step, the least over r of ``max(link bytes of the rest / both, compute + R(r))``:
    the bytes not recreated cross the link as in the peak bound, the recreated ones run again."""
    def seconds(r, spent):
        rest = excess - r
        return np.maximum((rest + np.maximum(rest - leaf - nxt, 0.0)) / both, compute + spent)

    meets = [(excess / both - compute, 1 / both), ((2 * excess - leaf - nxt) / both - compute, 2 / both)]
    return _least_over_recompute(cost, np.minimum(cost.total, excess), seconds, meets, [excess - leaf - nxt])


def recompute_late_in(excess, nxt, after, h2d, cost: RecomputeCost) -> np.ndarray:
    """Per step s2, the least over r of what the copies in and the recomputation after it add to
    the compute from s2 on: ``max(max(excess - r - nxt, 0) / h2d - after, R(r))``."""
    def seconds(r, spent):
        return np.maximum(np.maximum(excess - r - nxt, 0.0) / h2d - after, spent)

    return _least_over_recompute(cost, np.minimum(cost.total, excess), seconds,
                                 [((excess - nxt) / h2d - after, 1 / h2d)], [excess - nxt])


def _link_rates(profile: Profile) -> tuple[float, float, float]:
    """The fastest the simulator moves bytes host to device, device to host (one way alone, or
    half the duplex rate each while both move), and both ways together."""
    link = profile.link
    return (max(link.h2d_bytes_per_s, link.duplex_bytes_per_s / 2),
            max(link.d2h_bytes_per_s, link.duplex_bytes_per_s / 2),
            max(link.h2d_bytes_per_s, link.d2h_bytes_per_s, link.duplex_bytes_per_s))


def class_bounds(facts: GraphFacts, allocation, profile: Profile,
                 node_seconds: np.ndarray | None = None) -> tuple[float, float]:
    """(split, two splits) for plans that keep every tensor in an object of its own size class of
    ``allocation`` (an ``allocator.Allocation``), as the SwapAdvisor planner does: no such plan is
    faster, whatever its eviction choices or copy order. At each step class k holds at most
    cnt[k] tensors, so the rest of its live tensors are off the device, whatever room other
    classes have. The least a step sends out takes leaves first, then the class's smallest
    other tensors; the least it brings in takes next values first, then the smallest others
    (a tensor the step touches may count as off: looser, still a bound). These replace the
    pooled excess of ``lower_bounds`` in its split formulas. Their distance from the pooled
    bounds is what the allocation's classes cost; a plan's distance from them, what the
    planner does not hide."""
    g, lt = facts.graph, bound_lifetimes(facts)
    # Each tensor over its own steps, so that it keeps its own kind (a parameter's next value,
    # written over it, is a next value); an output written in place over its input starts a
    # step later, as the two share one object at the step that writes it.
    start, end = lt.start.copy(), lt.end
    start[lt.inplace_of >= 0] += 1
    nbytes = np.array([t.nbytes for t in g.tensors], dtype=np.float64)
    ids = np.nonzero((lt.start >= 0) & (start <= end))[0]
    kind = tensor_classes(g)[ids]
    klass = SizeClassLayout.from_allocation(allocation).class_of_sizes(nbytes[ids].astype(np.int64))
    steps = step_seconds(facts, profile, node_seconds)
    n = len(steps)
    if not n:
        return 0.0, 0.0
    out, into = np.zeros(n), np.zeros(n)
    for k in np.unique(klass):
        members = ids[klass == k]
        kinds = kind[klass == k]
        size = nbytes[members]
        for total, moves_none in ((out, LEAF), (into, NEXT_VALUE)):
            # Off first: those this direction does not move, then the smallest.
            moved = kinds != moves_none
            rank = np.lexsort((size, moved))
            total += _bytes_off(start[members[rank]], end[members[rank]], (size * moved)[rank],
                                int(allocation.cnt[k]), n)
    h2d, d2h, _ = _link_rates(profile)
    before = np.concatenate(([0.0], np.cumsum(steps)[:-1]))
    after = float(steps.sum()) - before
    split = float(np.max(np.maximum(out / d2h, before) + np.maximum(into / h2d, after)))
    return split, float(steps.sum()) + _two_split_of(out, into, before, after, h2d, d2h)[0]


def _bytes_off(start: np.ndarray, end: np.ndarray, moves: np.ndarray, count: int, n_steps: int,
               cells: int = 1 << 23) -> np.ndarray:
    """Per step, the ``moves`` of the first (in the given order) live members beyond ``count``
    that must be off the device: members live over [start, end]. In blocks of steps so
    that a block's [step, member] matrix stays under ``cells``."""
    total = np.zeros(n_steps)
    block = max(1, cells // max(1, len(start)))
    for lo in range(0, n_steps, block):
        s = np.arange(lo, min(n_steps, lo + block))[:, None]
        live = (start[None, :] <= s) & (end[None, :] >= s)
        seen = np.cumsum(live, axis=1)
        over = seen[:, -1:] - count
        total[lo:lo + len(s)] = (live & (seen <= over)) @ moves
    return total


def two_split(excess, leaf, nxt, before, after, h2d, d2h) -> tuple[float, tuple[int, int]]:
    """The most that copies forced out before some step s1 and copies forced in after a step
    s2 >= s1 add to the compute, and (s1, s2): ``max(out(s1) / d2h - before(s1), 0) +
    max(in(s2) / h2d - after(s2), 0)``. out(s) is the least a cover of the excess at s sends out
    (its forced activations and the next values the leaves cannot replace), in(s) the least it
    brings in (its forced activations and the leaves the next values cannot replace)."""
    forced = np.maximum(excess - leaf - nxt, 0.0)
    rest = excess - forced
    out = forced + np.maximum(rest - leaf, 0.0)
    into = forced + rest - np.minimum(nxt, rest)
    return _two_split_of(out, into, before, after, h2d, d2h)


def _two_split_of(out, into, before, after, h2d, d2h) -> tuple[float, tuple[int, int]]:
    """``two_split`` given per step the least bytes a cover sends out (``out``) and brings in (``into``)."""
    return _worst_pair(np.maximum(out / d2h - before, 0.0), np.maximum(into / h2d - after, 0.0))


def _worst_pair(late_out, late_in) -> tuple[float, tuple[int, int]]:
    """The most of ``late_out[s1] + late_in[s2]`` over s1 <= s2, and (s1, s2)."""
    if not (late_out.any() or late_in.any()):
        return 0.0, (-1, -1)
    best_out = np.maximum.accumulate(late_out)          # the worst s1 at or before each s2
    s2 = int(np.argmax(best_out + late_in))
    s1 = int(np.argmax(late_out[:s2 + 1]))
    return float(best_out[s2] + late_in[s2]), (s1, s2)


def split_per_step(excess, leaf, nxt, before, after, h2d, d2h) -> np.ndarray:
    """Per step: the least ``max(out / d2h, before) + max(in / h2d, after)`` over which
    untouched tensors hold the ``excess`` off the device. Activations are used only where
    leaves and next values do not suffice (a byte of one costs both directions); of the rest,
    y bytes are next values (out only) and the others leaves (in only). The cost is convex and
    piecewise linear in y, so its least value is at a breakpoint: an end of y's range or
    where one direction's copy time meets its side's compute."""
    forced = np.maximum(excess - leaf - nxt, 0.0)
    rest = excess - forced
    lo = np.maximum(rest - leaf, 0.0)
    hi = np.minimum(nxt, rest)
    candidates = np.stack([lo, hi, before * d2h - forced, forced + rest - after * h2d])
    y = np.clip(candidates, lo, hi)
    cost = np.maximum((forced + y) / d2h, before) + np.maximum((forced + rest - y) / h2d, after)
    return cost.min(axis=0)


def persistent_bound(g: Graph, pool: float, h2d: float, d2h: float, both: float) -> float:
    """Bytes every iteration must move whatever the order: the batch and the state read that
    did not stay resident come in; the next values that cannot stay resident go out."""
    read = np.array([bool(u) for u in g.users])
    nbytes = np.array([t.nbytes for t in g.tensors], dtype=float)
    state = g.leaves(*PERSISTENT_KINDS)
    batch = g.leaves(Kind.INPUT, Kind.LABEL)
    state_read = float(nbytes[state][read[state]].sum()) if state else 0.0
    batch_bytes = float(nbytes[batch][read[batch]].sum()) if batch else 0.0
    written = [nxt for cur, nxt in g.state_pairs if nxt != cur]     # unchanged state never goes out
    next_values = float(nbytes[written].sum()) if written else 0.0
    into = max(state_read - pool, 0.0) + batch_bytes
    out = max(next_values - pool, 0.0)
    return max(into / h2d, out / d2h, (into + out) / both)
