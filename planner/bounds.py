"""Lower bounds on one iteration's time for a (graph, order, budget, profile): no Program made
under that budget can be faster, whatever its allocation, eviction choices or copy order.

- compute: the compute stream runs every operator once (the profile's time plus the dispatch
  cost the simulator charges per instruction).
- peak: at step s, ``E(s) = live(s) - pool`` bytes must be off the device, taken from tensors
  step s does not touch. A byte of a leaf (its host copy is current) or of a state's next
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

Everything is numpy over steps and tensors: the paper's models take milliseconds.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from engine.ir import PERSISTENT_KINDS, Graph, Kind
from engine.liveness import live_bytes_per_step
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


def step_bytes(facts: GraphFacts) -> StepBytes:
    g, order, lt = facts.graph, facts.order, facts.lifetimes
    n_steps = len(order)
    nbytes = np.array([t.nbytes for t in g.tensors], dtype=np.int64)
    cls = tensor_classes(g)
    # Each tensor over its own [start, end]: an in-place pair overlaps only at the step that
    # writes the output over the input, which touches both, so untouched bytes count it once.
    diff = np.zeros((3, n_steps + 1), dtype=np.int64)
    np.add.at(diff, (cls, lt.start), nbytes)
    np.add.at(diff, (cls, lt.end + 1), -nbytes)
    untouched = np.cumsum(diff[:, :-1], axis=1)
    touch_step, touch_tensor = touched(g, order)
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
    link = profile.link
    pool = np.inf if budget is None else float(budget.pool_bytes)
    # The fastest each direction, and both together, can move bytes in the simulator: one way
    # alone, or half the duplex rate each while both move.
    h2d = max(link.h2d_bytes_per_s, link.duplex_bytes_per_s / 2)
    d2h = max(link.d2h_bytes_per_s, link.duplex_bytes_per_s / 2)
    both = max(link.h2d_bytes_per_s, link.d2h_bytes_per_s, link.duplex_bytes_per_s)

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
