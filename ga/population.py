"""Chromosomes, the first generation, children, and survival (SwapAdvisor Section 5.1).

A chromosome (``Individual``) is a schedule (int32 node ids) and an allocation, with its
simulated time once evaluated. ``Breeder`` makes and evaluates individuals, one per task;
one lives in each worker process. Every random decision is drawn from a generator seeded by
(seed, generation, index, purpose) (``rng_for``), never from a shared stream, so a search is
reproducible whatever the number of workers and whichever finishes first.

- First generation: individual 0 is the default order with the simple allocation (the
  unsearched SwapAdvisor plan); individual 1, where it differs, the order that runs each
  parameter update as soon as it is ready, also with the simple allocation (not in the paper:
  in the default order every update waits for the whole backward pass, and random orders
  rarely find this one); the others are random topological orders with random valid
  allocations.
- Children: a crossover of two parents gives 2 schedules x 2 allocations = 4 children, each
  then mutated. Ablations fix one half: mode "schedule" keeps the simple allocation (2
  children per crossover), mode "allocation" keeps the default order (2 children).
- Knobs (not in the paper): where the policy declares options a search may vary
  (``Policy.knobs``, e.g. swapadvisor's headroom) and the search is asked to, each individual
  also carries a value of each, on the knob's grid: the seeds the defaults, random individuals
  random values, a child each knob from one of its parents, moved one grid step with
  probability P.
- Survival: Eq. 1, a softmax over the normalised time t_norm = (T_best - t) / T_best, with
  T_best the best time seen so far; Np survivors are drawn without replacement. Infeasible
  individuals (time inf) have probability 0 and survive only to fill a population that has
  fewer feasible members than Np. Eq. 1 as printed has almost no pressure (t_norm lies in
  [-(t/T_best - 1), 0], so candidates 10% apart differ in weight by 10%); ``temperature``
  divides t_norm (1: the paper's), and ``elite`` (not in the paper) keeps the fastest few.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from allocator import Allocation
from planner.policy import Knob

from allocator.unrestricted_classes import widened

from . import allocation_ops, schedule_ops, unrestricted_ops
from .context import GraphContext
from .fitness import Evaluator
from .locality import WINDOWS, locality_order

MODES = ("both", "schedule", "allocation")

# Purposes of random streams (the last entry of a seed); mutations take two (one per child).
FIRST, PAIR, SELECT, SCHEDULE_CROSSOVER, SCHEDULE_MUTATION, ALLOCATION_CROSSOVER, ALLOCATION_MUTATION = \
    0, 1, 2, 3, 4, 6, 7
IMMIGRANT_DRAW = 9
LOCALITY = 10       # and 11: the locality mutation's draws, one per schedule child
KNOBS = 12          # and 13: a child's knob values, one draw per allocation child
SEGMENT = 14        # a schedule crossover's kind and segment
TRANSFER = 15       # and 16: whether an allocation child trades objects between classes, and how
IMMIGRANT = -1      # the child index of a task that asks for a random immigrant instead of a child


def rng_for(seed: int, generation: int, index: int, purpose: int, attempt: int = 0) -> np.random.Generator:
    key = [int(seed), int(generation), int(index), int(purpose)]
    return np.random.default_rng(key + [int(attempt)] if attempt else key)


# A child equal to a genome the search knows (ga.search: the population and the latest evaluated)
# is bred again with fresh mutation draws up to this many times, then dropped unevaluated. On
# the search-quality study's small graphs 60-80% of the children were such repeats before (a
# converged population breeds copies of itself), so most evaluations re-measured known plans.
REBREED_ATTEMPTS = 8


def genome_key(schedule: np.ndarray, allocation: Allocation, options: tuple = ()) -> bytes:
    """A digest of (schedule, allocation, knob values): equal for equal individuals."""
    h = hashlib.blake2b(digest_size=16)
    for part in (schedule, allocation.cls, allocation.cnt):
        h.update(np.ascontiguousarray(part, dtype=np.int64).tobytes())
        h.update(b"|")
    if options:
        h.update(repr(options).encode())
    return h.digest()


@dataclass
class Individual:
    schedule: np.ndarray
    allocation: Allocation
    time: float = math.inf
    options: tuple = ()        # (knob name, value) pairs, sorted by name; () where no knob is searched

    @property
    def key(self) -> bytes:
        return genome_key(self.schedule, self.allocation, self.options)

    def to_dict(self) -> dict:
        return {"schedule": self.schedule.tolist(), "allocation": self.allocation.to_dict(),
                "time": self.time if math.isfinite(self.time) else None, "options": dict(self.options)}

    @classmethod
    def from_dict(cls, d: dict) -> Individual:
        t = d.get("time")
        return cls(np.asarray(d["schedule"], dtype=np.int32), Allocation.from_dict(d["allocation"]),
                   math.inf if t is None else float(t), tuple(sorted(d.get("options", {}).items())))


def distinct_plans(population: list[Individual], children: list[Individual]) -> list[Individual]:
    """The children that plan unlike the population and each other. A child with the order and
    allocation of another and exactly its time differs only in knob values that changed nothing
    (RNN-8-8K, analytic V100, 16 GiB: max_chain 4 and 16 plan alike, as do recompute 2 and 4):
    kept, such clones crowd the population with one plan (there the joint search stayed at
    16.550 s on seeds 0 and 1 while the swap-only one reached 16.492-16.496)."""
    seen = {(genome_key(i.schedule, i.allocation), i.time) for i in population}
    out = []
    for child in children:
        plan = (genome_key(child.schedule, child.allocation), child.time)
        if plan not in seen:
            seen.add(plan)
            out.append(child)
    return out


@dataclass(frozen=True)
class Variation:
    mode: str = "both"
    mutation: float = 0.1          # P: per scheduling step, per CLS entry and per count
    sigma: float = allocation_ops.DEFAULT_SIGMA
    schedule_mutation: float | None = None   # P for scheduling steps alone (None: ``mutation``)
    seeded: bool = True            # first generation: the seeds, then random; False: all random
    locality: float = 0.0          # probability a schedule child is re-run through ga/locality.py
    knobs: Mapping[str, Knob] = field(default_factory=dict)   # the policy's options searched as genes
    segment: float = 0.0           # probability a schedule crossover is segment_crossover, not Figure 4's
    transfer: float = 0.0          # probability an allocation child also gets allocation_ops.transfer
    # Any size to any class (Figure 9c's search, ga/unrestricted_ops.py) instead of the paper's runs.
    unrestricted: bool = False

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"unknown search mode '{self.mode}' (known: {', '.join(MODES)})")
        for p in (self.mutation, self.schedule_mutation):
            if p is not None and not 0 <= p <= 1:
                raise ValueError(f"mutation probability must be in [0, 1], got {p}")
        if not 0 <= self.locality <= 1:
            raise ValueError(f"the locality mutation's probability must be in [0, 1], got {self.locality}")
        if not 0 <= self.segment <= 1:
            raise ValueError(f"the segment crossover's probability must be in [0, 1], got {self.segment}")
        if not 0 <= self.transfer <= 1:
            raise ValueError(f"the transfer mutation's probability must be in [0, 1], got {self.transfer}")

    @property
    def children_per_crossover(self) -> int:
        return 4 if self.mode == "both" else 2


class Breeder:
    """Makes individuals and evaluates them; built once per worker process."""

    def __init__(self, ctx: GraphContext, evaluator: Evaluator, variation: Variation, seed: int,
                 simple: Allocation | None):
        self.ctx, self.evaluator, self.variation, self.seed = ctx, evaluator, variation, int(seed)
        self.pool_bytes = evaluator.budget.pool_bytes      # what allocations may use (scratch is apart)
        # Individual 0's order and the allocation-only search's: the order the facts were made
        # for (insertion order unless the caller gave another, e.g. engine.schedules.mxnet_order).
        self.default_order = np.asarray(evaluator.facts.order, dtype=np.int32)
        # The CLS operators: Figure 5's on monotone runs, or Figure 9c's on any mapping (which
        # widens the simple allocation into the unrestricted one it also is).
        self.cls_ops = unrestricted_ops if variation.unrestricted else allocation_ops
        self.simple = widened(simple) if variation.unrestricted and simple is not None else simple
        # Knob values of the seeds and of ablations (which vary one half of the genome only).
        self.default_options = tuple(sorted((name, k.default) for name, k in variation.knobs.items()))
        # The seeds' knob values: the defaults, and each knob's seed values (Knob.seeds) one at a time.
        defaults = dict(self.default_options)
        one_changed = [canonical_options(tuple(sorted({**defaults, name: v}.items())), variation.knobs)
                       for name, k in sorted(variation.knobs.items()) for v in k.seeds]
        self.seed_options = list(dict.fromkeys([self.default_options, *one_changed]))
        if variation.mode == "schedule" and simple is None:
            raise ValueError("a schedule-only search keeps the simple allocation, which does not fit "
                             "this budget")

    def evaluated(self, schedule: np.ndarray, allocation: Allocation, options: tuple = ()) -> Individual:
        return Individual(schedule, allocation, self.evaluator.time(schedule, allocation, options), options)

    def random_options(self, rng: np.random.Generator) -> tuple:
        """A value of each knob drawn from its grid (the defaults in an ablation)."""
        if self.variation.mode != "both":
            return self.default_options
        return canonical_options(tuple((name, k.values[int(rng.integers(len(k.values)))])
                                       for name, k in sorted(self.variation.knobs.items())), self.variation.knobs)

    def options_child(self, generation: int, k: int, i: int, p1: Individual, p2: Individual,
                      attempt: int = 0) -> tuple:
        """Knob values of allocation child ``i`` of crossover ``k``: each knob's value from either
        parent, moved one step along its grid with probability P."""
        if self.variation.mode != "both" or not self.variation.knobs:
            return self.default_options
        rng = rng_for(self.seed, generation, k, KNOBS + i, attempt)
        parents = (dict(p1.options), dict(p2.options))
        out = []
        for name, knob in sorted(self.variation.knobs.items()):
            value = parents[int(rng.integers(2))].get(name, knob.default)
            j = knob.values.index(value) if value in knob.values else knob.values.index(knob.default)
            if rng.random() < self.variation.mutation:
                j = min(max(j + (1 if rng.random() < 0.5 else -1), 0), len(knob.values) - 1)
            out.append((name, knob.values[j]))
        return canonical_options(tuple(out), self.variation.knobs)

    def first(self, index: int) -> Individual:
        """Individual ``index`` of the first generation, evaluated."""
        rng = rng_for(self.seed, 0, index, FIRST)
        mode = self.variation.mode
        seeded = self.variation.seeded and (index == 0 or (index == 1 and self.ctx.updates_first is not None))
        if (seeded and index == 0) or mode == "allocation":
            schedule = self.default_order
        elif seeded:
            schedule = self.ctx.updates_first
        else:
            schedule = schedule_ops.random_schedule(self.ctx, rng)
        if self.simple is not None and (seeded or mode == "schedule"):
            allocation = self.simple
        else:
            allocation = self.cls_ops.random_allocation(self.ctx, self.pool_bytes, rng)
        if seeded and mode == "both":
            return min((self.evaluated(schedule, allocation, o) for o in self.seed_options), key=lambda i: i.time)
        options = self.default_options if seeded else self.random_options(rng)
        return self.evaluated(schedule, allocation, options)

    def schedule_child(self, generation: int, k: int, i: int, p1: Individual, p2: Individual,
                       attempt: int = 0) -> np.ndarray:
        """Schedule child ``i`` (0 or 1) of crossover ``k``: Figure 4's crossover, then mutation
        (drawn afresh for each ``attempt``), and with probability ``locality`` the locality mutation."""
        if self.variation.mode == "allocation":
            return self.default_order
        crossed = self.crossed_schedules(generation, k, p1, p2)
        rng = rng_for(self.seed, generation, k, SCHEDULE_MUTATION + i, attempt)
        v = self.variation
        child = schedule_ops.mutate(self.ctx, crossed[i], v.mutation if v.schedule_mutation is None
                                    else v.schedule_mutation, rng)
        if v.locality > 0:
            rng = rng_for(self.seed, generation, k, LOCALITY + i, attempt)
            if rng.random() < v.locality:
                child = locality_order(self.ctx, child, int(rng.integers(WINDOWS[0], WINDOWS[1] + 1)))
        return child

    def crossed_schedules(self, generation: int, k: int, p1: Individual, p2: Individual) -> tuple:
        """Crossover ``k``'s two schedules: Figure 4's, or with probability ``segment`` a segment
        crossover over a random stretch."""
        v = self.variation
        if v.segment > 0:
            rng = rng_for(self.seed, generation, k, SEGMENT)
            if rng.random() < v.segment:
                n = self.ctx.num_nodes
                a, b = sorted(int(x) for x in rng.integers(0, n + 1, 2))
                return schedule_ops.segment_crossover(self.ctx, p1.schedule, p2.schedule, a, b)
        return schedule_ops.random_crossover(p1.schedule, p2.schedule,
                                             rng_for(self.seed, generation, k, SCHEDULE_CROSSOVER))

    def allocation_child(self, generation: int, k: int, i: int, p1: Individual, p2: Individual,
                         attempt: int = 0) -> Allocation:
        """Allocation child ``i`` (0 or 1) of crossover ``k``: Figure 5's crossover, mutation, repair,
        and with probability ``transfer`` a trade of objects between two classes."""
        if self.variation.mode == "schedule":
            return self.simple
        crossed = self.cls_ops.random_crossover(self.ctx, p1.allocation, p2.allocation, self.pool_bytes,
                                                rng_for(self.seed, generation, k, ALLOCATION_CROSSOVER))
        rng = rng_for(self.seed, generation, k, ALLOCATION_MUTATION + i, attempt)
        child = self.cls_ops.mutate(self.ctx, crossed[i], self.variation.mutation, self.pool_bytes, rng,
                                    self.variation.sigma)
        if self.variation.transfer > 0:
            rng = rng_for(self.seed, generation, k, TRANSFER + i, attempt)
            if rng.random() < self.variation.transfer:
                child = allocation_ops.transfer(self.ctx, child, self.pool_bytes, rng)
        return child

    def child(self, task: tuple) -> Individual | None:
        """``task = (generation, k, j, parent1, parent2, known)``: child j of crossover k, evaluated;
        None if every attempt bred a genome in ``known`` (the population's ``genome_key``s).

        Children are (schedule a, allocation b) for a, b in 0..1 (mode "both": j = 2a + b; the
        ablations vary only one half, j = a or b). Each half is drawn from its own seeds, so
        every child can be made in any process, alone, and all agree on their siblings.
        """
        generation, k, j, p1, p2, known = task
        if j == IMMIGRANT:
            return self.immigrant(generation, k, known)
        mode = self.variation.mode
        a, b = (j // 2, j % 2) if mode == "both" else ((j, 0) if mode == "schedule" else (0, j))
        for attempt in range(REBREED_ATTEMPTS):
            schedule = self.schedule_child(generation, k, a, p1, p2, attempt)
            allocation = self.allocation_child(generation, k, b, p1, p2, attempt)
            options = self.options_child(generation, k, b, p1, p2, attempt)
            if genome_key(schedule, allocation, options) not in known:
                return self.evaluated(schedule, allocation, options)
        return None

    def immigrant(self, generation: int, k: int, known: frozenset) -> Individual | None:
        """A random individual (schedule and allocation as in an unseeded first generation, per
        the mode), bred into generation ``generation`` as its ``k``-th immigrant; None if every
        attempt drew a genome in ``known``."""
        mode = self.variation.mode
        for attempt in range(REBREED_ATTEMPTS):
            rng = rng_for(self.seed, generation, k, IMMIGRANT_DRAW, attempt)
            schedule = (self.default_order if mode == "allocation" else schedule_ops.random_schedule(self.ctx, rng))
            allocation = (self.simple if mode == "schedule"
                          else self.cls_ops.random_allocation(self.ctx, self.pool_bytes, rng))
            options = self.random_options(rng)
            if genome_key(schedule, allocation, options) not in known:
                return self.evaluated(schedule, allocation, options)
        return None

    def children(self, generation: int, k: int, p1: Individual, p2: Individual,
                 known: frozenset = frozenset()) -> list[Individual | None]:
        """All children of crossover ``k``, in order (in this process)."""
        return [self.child((generation, k, j, p1, p2, known)) for j in range(self.variation.children_per_crossover)]


def canonical_options(options: tuple, knobs: Mapping[str, Knob]) -> tuple:
    """``options`` ((name, value) pairs, sorted) with each knob that the others leave without
    effect (``Knob.inert_unless`` at 0) at its default: one genome for plans that are alike."""
    values = dict(options)
    for name, knob in knobs.items():
        if name in values and knob.inert_given(values):
            values[name] = knob.default
    return tuple(sorted(values.items()))


def first_task(breeder: Breeder, index: int) -> Individual:
    return breeder.first(index)


def child_task(breeder: Breeder, task: tuple) -> Individual:
    return breeder.child(task)


def pairs(population_size: int, count: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """``count`` parent pairs, two distinct individuals each (the same one if there is only one)."""
    if population_size < 2:
        return [(0, 0)] * count
    return [tuple(int(i) for i in rng.choice(population_size, 2, replace=False)) for _ in range(count)]


def survival_probabilities(times, t_best: float, temperature: float = 1.0) -> np.ndarray:
    """Eq. 1: softmax of t_norm / temperature, t_norm = (T_best - t) / T_best (temperature 1:
    the paper's); infinite times get 0 (uniform if all are)."""
    t = np.asarray(times, dtype=float)
    finite = np.isfinite(t)
    if not finite.any() or not math.isfinite(t_best) or t_best <= 0:
        return np.full(t.size, 1.0 / t.size) if t.size else t
    t_norm = np.where(finite, (t_best - t) / t_best / temperature, -np.inf)
    w = np.exp(t_norm - t_norm[finite].max())
    return w / w.sum()


def select(times, t_best: float, k: int, rng: np.random.Generator, elite: int = 0,
           temperature: float = 1.0) -> np.ndarray:
    """Indices of ``k`` survivors drawn without replacement by ``survival_probabilities``, ascending.

    ``elite`` > 0 (not in the paper) first keeps that many of the fastest (ties: lowest index),
    then draws the rest from the others by Eq. 1.
    """
    t = np.asarray(times, dtype=float)
    n = t.size
    if k >= n:
        return np.arange(n)
    kept = np.argsort(t, kind="stable")[:min(max(elite, 0), k)]
    others = np.setdiff1d(np.arange(n), kept)
    p = survival_probabilities(t[others], t_best, temperature)
    need = k - kept.size
    alive = np.flatnonzero(p > 0)
    if alive.size >= need:
        drawn = rng.choice(others.size, size=need, replace=False, p=p)
    else:
        dead = np.flatnonzero(p == 0)
        drawn = np.concatenate((alive, rng.choice(dead, size=need - alive.size, replace=False)))
    return np.sort(np.concatenate((kept, others[drawn])))
