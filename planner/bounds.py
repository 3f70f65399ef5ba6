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

Everything is numpy over steps and tensors: the paper's models take milliseconds.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from allocator import SizeClassLayout
from engine.ir import PERSISTENT_KINDS, Graph, Kind
from engine.liveness import Lifetimes, live_bytes_per_step
from engine.profile import Profile

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

    @property
    def bound(self) -> float:
        return max(self.compute_s, self.peak_s, self.persistent_s, self.split_s, self.two_split_s)

    def to_json(self) -> dict:
        return dict(asdict(self), bound_s=self.bound)


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


def step_bytes(facts: GraphFacts) -> StepBytes:
    g, order = facts.graph, facts.order
    touch_step, touch_tensor = touched(g, order)
    lt = bound_lifetimes(facts, (touch_step, touch_tensor))
    n_steps = len(order)
    nbytes = np.array([t.nbytes for t in g.tensors], dtype=np.int64)
    cls = tensor_classes(g)
    # Each tensor over its own [start, end]: an in-place pair overlaps only at the step that
    # writes the output over the input, which touches both, so untouched bytes count it once.
    diff = np.zeros((3, n_steps + 1), dtype=np.int64)
    np.add.at(diff, (cls, lt.start), nbytes)
    np.add.at(diff, (cls, lt.end + 1), -nbytes)
    untouched = np.cumsum(diff[:, :-1], axis=1)
    np.subtract.at(untouched, (cls[touch_tensor], touch_step), nbytes[touch_tensor])
    return StepBytes(live_bytes_per_step(g, order, lt), untouched)


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
    secs = profile.node_seconds(facts.graph) if node_seconds is None else np.asarray(node_seconds, dtype=float)
    return secs[np.asarray(facts.order, dtype=np.int64)] + profile.dispatch_s


def lower_bounds(facts: GraphFacts, budget: Budget | None, profile: Profile,
                 node_seconds: np.ndarray | None = None) -> Bounds:
    """The bounds for ``facts.graph`` in ``facts.order`` under ``budget`` (None: unlimited
    memory) on ``profile`` (``node_seconds``: its op times, if already computed)."""
    pool = np.inf if budget is None else float(budget.pool_bytes)
    h2d, d2h, both = _link_rates(profile)

    steps = step_seconds(facts, profile, node_seconds)
    compute = float(steps.sum())
    persistent = persistent_bound(facts.graph, pool, h2d, d2h, both)
    if not len(steps):
        return Bounds(compute, 0.0, persistent, compute, -1, compute)
    sb = step_bytes(facts)
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
    return Bounds(compute, peak, persistent, float(split[s]) if s >= 0 else compute, s, compute + two, steps_two)


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
    late_out = np.maximum(out / d2h - before, 0.0)
    late_in = np.maximum(into / h2d - after, 0.0)
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
