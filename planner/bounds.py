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

    @property
    def bound(self) -> float:
        return max(self.compute_s, self.peak_s, self.persistent_s, self.split_s)

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
        return Bounds(compute, 0.0, persistent, compute, -1)
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
    return Bounds(compute, peak, persistent, float(split[s]) if s >= 0 else compute, s)


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
