"""The genetic search: ``search(facts, budget, profile, options) -> SearchResult``.

One generation: draw parent pairs from the population, make each pair's children
(crossover, mutation, repair) and, with ``immigrants``, some random individuals, evaluate
them (plan + simulate) in the worker processes, then keep Np of parents and children by
Eq. 1 (``population``). A child equal to a member of the population or to a genome evaluated
lately (``REMEMBERED``) is bred again with fresh draws, and dropped unevaluated if it stays
one; a generation that breeds nothing new is followed by one of random individuals, and a
second such ends the search ("converged"). The search stops after
``max_generations``, at ``time_limit_s`` (in the middle of a generation if need be: the
children evaluated so far still compete), or on Ctrl-C, and returns the best individual
seen. With a checkpoint path, the state is saved atomically after every generation, and
``resume=True`` continues from it: every random decision is seeded by (seed, generation,
index), so a resumed search reaches exactly the result of an uninterrupted one.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from allocator import Allocation
from allocator import registry as allocators
from engine.profile import Profile
from planner.allocation import simple_allocation
from planner.budget import Budget
from planner.errors import PlanError
from planner.facts import GraphFacts
from planner.policy import PlanRequest, Policy, searched, unlimited_program
from planner.simulate import simulate

from . import checkpoint as ckpt
from .allocation_ops import DEFAULT_SIGMA
from .context import GraphContext
from .fitness import Evaluator
from .history import GenerationStats, plot_history, write_history
from .polish import Polished, evaluate_task, polish
from .ray_workers import RayWorkers
from .workers import DeadlineReached, ProcessWorkers
from .population import (MODES, PAIR, SELECT, Breeder, Individual, Variation, child_task, distinct_plans,
                         first_task, IMMIGRANT, pairs, rng_for, select)

MUTATION_PICKS = 150.0          # random picks per child a schedule mutation aims at (SearchOptions)
# Genomes remembered (the latest evaluated) so that a child equal to one of them, or to a member
# of the population, is bred again instead of evaluated again. The memory travels with every
# task (16 bytes a genome), so it is bounded; it holds all of a 1000-evaluation search. On the
# search-quality study (bench.search_quality) remembering only the population gave the GA 28
# wins and 10 losses against random sampling; remembering the evaluated too, 39 and 4.
REMEMBERED = 2048
PAPER_SEARCH_SECONDS = 1800.0   # Section 6.1: "We set the search time for the GA to be 30 minutes."


@dataclass
class SearchOptions:
    population: int = 144              # Np (Section 6.1)
    mutation: float = 0.1              # P (Section 6.1)
    # P for the schedule's steps; None: P, but at most MUTATION_PICKS / nodes, so a child of a
    # large graph gets about as many random picks as one of a mid-sized graph (P = 0.1 is ~960
    # random picks on RNN-8-8K's 9638 nodes, which wrecks good schedules; one 40 s search each,
    # 2 workers: RNN-8-8K 18.85 s at P = 0.1, 18.44 at 0.01, 18.42 at this default (0.016);
    # WResNet's 1653 nodes 33.00 at 0.1, 34.77 at 0.01, 34.22 at this default (0.091): one
    # seed, so differences of a few % there are noise).
    schedule_mutation: float | None = None
    # First generation seeded with the default order and updates as soon as ready (each with the
    # simple allocation); False: every individual random (the paper's setting).
    seeded: bool = True
    seed: int = 0
    workers: int | None = None         # processes; None: all cores; <= 1: in this process
    # Evaluate on Ray actors instead of local processes (ga/ray_workers.py): "local", "auto" or
    # a cluster address; workers None there means every CPU of the cluster.
    ray_address: str | None = None
    time_limit_s: float | None = None  # None with no max_generations: the paper's 30 minutes
    max_generations: int | None = None
    max_evaluations: int | None = None  # stop once this many candidates were planned and simulated
    # Fraction of each generation's newcomers drawn at random instead of bred (not in the paper).
    # On the search-quality study's small graphs (bench.search_quality, 1000 evaluations) 0.25
    # turned GA-vs-random from 21 wins / 13 losses into 28 / 10; at paper scale random orders
    # are far worse than bred ones (RNN: 0.17 of ideal), so the default stays 0 until measured.
    immigrants: float = 0.0
    # Probability that a schedule child also gets the locality mutation (ga/locality.py: a list
    # scheduler that keeps big tensors hot). From an all-random first generation, RNN-8-8K
    # reached 0.88 of ideal in 10 minutes on 2 cores at 0.2, against 0.30 without; seeded
    # searches of the five Table 1 models at 150 s were within noise of without it.
    locality: float = 0.2
    # Search the policy's knobs (Policy.knobs: swapadvisor's headroom, how readily it recomputes
    # and its longest chain) as genes beside the schedule and allocation; False: every plan takes
    # the policy's defaults. On since recomputation became a knob: 120 s on 2 cores, analytic V100,
    # 16 GiB, seed 0, off -> on: Inception-4 0.906 -> 0.936 of ideal, BRNN-4-8K 0.869 -> 0.891,
    # NasNet-25 0.704 -> 0.724 (a candidate with a chosen recompute value plans it alone instead
    # of beside the swap-only plan: 1.4-1.8x the evaluations). Headroom alone, before: within
    # noise (bench/results/ga_search_knobs_segment_ab_150s_2026-11-24.txt). Probability that a
    # schedule crossover takes a random stretch of the other parent (schedule_ops.segment_crossover)
    # instead of Figure 4's prefix: off, within a run's noise in the same A/B.
    knobs: bool = True
    # With knobs, end by polishing the best genome's knob values (ga/polish.py: coordinate
    # descent, at most 30 evaluations for swapadvisor, after the time limit): RNN-8-8K's joint
    # search had ended 0.35% behind the swap-only one at a headroom one grid step off.
    polish: bool = True
    segment: float = 0.0
    # Probability that an allocation child also trades objects between two classes
    # (allocation_ops.transfer). BRNN-4-8K, 150 s on 2 cores: 15.044 s at 0, 14.838 s at 0.5
    # (0.842 and 0.853 of ideal); RNN-8-8K 16.493 and 16.492 (ga_search_transfer_ab_150s_*.txt).
    transfer: float = 0.5
    mode: str = "both"                 # "both", "schedule" (simple allocation fixed), "allocation" (the facts' order fixed)
    # "restricted": the paper's CLS, classes are runs of consecutive sizes; "unrestricted": any
    # size to any class (Figure 9c's comparison: ga/unrestricted_ops.py; the pool allocator only).
    size_mapping: str = "restricted"
    children: int | None = None        # children per generation; None: Np
    sigma: float = DEFAULT_SIGMA       # count mutation: Gaussian sd as a fraction of the count
    # Survival: Eq. 1 with t_norm divided by ``temperature`` and the ``elite`` fastest always kept.
    # The paper's is temperature 1, elite 0; ours keeps pressure (issue 14's measurements: at
    # 0.02 with 2 elites RNN-4-1K went from no gain to -7.9%, small graphs' median gap
    # 1.020 -> 1.003). elite None: 2, or the population if smaller.
    temperature: float = 0.02
    elite: int | None = None
    checkpoint: str | None = None      # JSON path, written after every generation
    resume: bool = False               # continue from ``checkpoint`` if it exists
    progress: bool = True              # tqdm bar on stderr
    ideal: bool = True                 # also simulate the ideal (unlimited memory) program
    start_method: str | None = None    # multiprocessing: "fork" (default where available) or "spawn"
    # How the policy places tensors (PlanRequest.allocator; None: its default, swapadvisor's
    # "auto": the pool with the candidate's allocation or va's chunks, whichever is faster).
    allocator: str | None = None
    allocator_options: tuple = ()      # (name, value) pairs, e.g. (("chunk_bytes", 4 << 20),)
    # The policy's options held fixed for every candidate, (name, value) pairs (e.g. the caller's
    # ("recompute", 0.0): swap only); they win over the knobs' values.
    policy_options: tuple = ()

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"unknown search mode '{self.mode}' (known: {', '.join(MODES)})")
        if self.population < 1:
            raise ValueError(f"population must be at least 1, got {self.population}")
        if self.children is not None and self.children < 1:
            raise ValueError(f"children per generation must be at least 1, got {self.children}")
        if self.elite is not None and not 0 <= self.elite <= self.population:
            raise ValueError(f"elite must be between 0 and the population, got {self.elite}")
        if not 0 <= self.immigrants <= 1:
            raise ValueError(f"the immigrants' fraction must be in [0, 1], got {self.immigrants}")
        if not self.temperature > 0:
            raise ValueError(f"the selection temperature must be positive, got {self.temperature}")

        if self.size_mapping not in ("restricted", "unrestricted"):
            raise ValueError(f"size_mapping must be 'restricted' or 'unrestricted', got {self.size_mapping!r}")
        if self.size_mapping == "unrestricted" and (
                self.allocator is None or allocators.get(self.allocator).kinds != (allocators.SIZE_CLASSES,)):
            raise ValueError("an unrestricted size mapping is a size-class pool: name an allocator of size classes "
                             "only (the default plans on chunks too, which ignore the searched allocation)")
        if self.resume and not self.checkpoint:
            raise ValueError("resume needs a checkpoint path")

    def schedule_mutation_for(self, num_nodes: int) -> float:
        if self.schedule_mutation is not None:
            return self.schedule_mutation
        return min(self.mutation, MUTATION_PICKS / max(num_nodes, 1))

    @property
    def elites(self) -> int:
        return min(2, self.population) if self.elite is None else self.elite


@dataclass
class SearchResult:
    best_schedule: list[int]
    best_allocation: Allocation
    best_time: float                   # simulated seconds per iteration of the best individual
    initial_time: float | None         # default order + simple allocation (None: it does not fit, or
                                       # the first generation was all random)
    initial_best: float                # best of the first generation
    ideal_time: float | None           # unlimited memory (None if not asked for)
    generations: int                   # generations completed after the first
    evaluations: int                   # plans + simulations done
    elapsed_s: float                   # search seconds, over every resumed session
    stopped: str                       # "generations", "time", "evaluations", "converged" or "interrupted"
    mode: str
    history: list[GenerationStats] = field(default_factory=list)
    population: list[Individual] = field(default_factory=list)
    best_options: dict = field(default_factory=dict)   # the best individual's knob values (policy_options)
    # How the policy placed tensors while the search timed candidates (SearchOptions.allocator,
    # or the policy's default when that is None), and its options.
    allocator: str | None = None
    allocator_options: tuple = ()
    policy_options: tuple = ()         # SearchOptions.policy_options: held fixed
    polished: Polished | None = None   # the end-of-search knob polish (None: not run)

    def request(self, graph, facts: GraphFacts, budget: Budget, profile: Profile,
                node_seconds: np.ndarray | None = None) -> PlanRequest:
        """The PlanRequest of the best individual: its schedule, allocation, knob values and the
        allocator it was timed on."""
        return PlanRequest(graph, facts, budget, profile, node_seconds, self.best_schedule, self.best_allocation,
                           self.allocator, dict(self.allocator_options),
                           policy_options={**self.best_options, **dict(self.policy_options)})

    def knobs_chosen(self) -> str:
        """The best individual's knob values in words, e.g. ``headroom 0.25, max_chain 16,
        recompute 1`` ('' where no knob was searched)."""
        return ", ".join(f"{k} {v:g}" if isinstance(v, (int, float)) else f"{k} {v}"
                         for k, v in sorted(self.best_options.items()))

    def fraction_of_ideal(self) -> float | None:
        """Ideal time over best time: the throughput relative to ideal (Figure 6's bars)."""
        if self.ideal_time is None or not math.isfinite(self.best_time):
            return None
        return self.ideal_time / self.best_time

    def write_history(self, path: str) -> None:
        write_history(self.history, path)

    def plot(self, path: str, model: str, policy: str, budget_bytes: int, note: str | None = None) -> bool:
        return plot_history(self.history, path, model, policy, budget_bytes, note)


def make_breeder(ctx: GraphContext, facts: GraphFacts, profile: Profile, budget: Budget, policy: Policy,
                 node_seconds: np.ndarray, variation: Variation, seed: int, simple: Allocation | None,
                 allocator: str | None = None, allocator_options: tuple = (), policy_options: tuple = ()) -> Breeder:
    """A worker's state: built once in each worker process."""
    evaluator = Evaluator(facts, profile, budget, policy, node_seconds, allocator, allocator_options, policy_options)
    return Breeder(ctx, evaluator, variation, seed, simple)


def ideal_time(facts: GraphFacts, profile: Profile, node_seconds: np.ndarray) -> float:
    program = unlimited_program(facts.graph, facts)
    return float(simulate(program, facts.graph, profile, node_seconds).total)


class _Run:
    """The mutable state of one search; ``to_state``/``from_state`` are the checkpoint."""

    def __init__(self, name: str, budget: Budget, opts: SearchOptions, ctx: GraphContext, knobs=()):
        self.name, self.budget, self.opts, self.ctx, self.knobs = name, budget, opts, ctx, tuple(knobs)
        self.generation = 0
        self.population: list[Individual] = []
        self.best: Individual | None = None
        self.initial_time: float | None = None
        self.initial_best = math.inf
        self.ideal: float | None = None
        self.evaluations = 0
        self.elapsed_before = 0.0
        self.history: list[GenerationStats] = []
        self.remembered: dict[bytes, None] = {}   # genome keys evaluated lately, oldest first
        self.stalled = False                      # the last generation bred nothing new

    def remember(self, individuals: list[Individual]) -> None:
        """Keep the genomes of ``individuals`` among the last REMEMBERED evaluated."""
        for ind in individuals:
            key = ind.key
            self.remembered.pop(key, None)
            self.remembered[key] = None
        for key in list(self.remembered)[:max(len(self.remembered) - REMEMBERED, 0)]:
            del self.remembered[key]

    def known(self) -> frozenset:
        """What a child must not be: the population and the genomes remembered."""
        return frozenset(self.remembered).union(i.key for i in self.population)

    def identity(self) -> dict:
        o = self.opts
        return {"graph": self.name, "nodes": self.ctx.num_nodes, "sizes": self.ctx.sizes.tolist(),
                "budget": self.budget.device_bytes, "seed": o.seed, "population": o.population, "mode": o.mode,
                "mutation": o.mutation, "schedule_mutation": o.schedule_mutation_for(self.ctx.num_nodes),
                "children": o.children, "seeded": o.seeded, "sigma": o.sigma, "elite": o.elites,
                "temperature": o.temperature, "immigrants": o.immigrants, "locality": o.locality,
                "knobs": sorted(self.knobs), "segment": o.segment,
                "transfer": o.transfer, **({"allocator": o.allocator} if o.allocator else {}),
                **({"size_mapping": o.size_mapping} if o.size_mapping != "restricted" else {})}

    def to_state(self, elapsed: float) -> dict:
        return {"identity": self.identity(), "generation": self.generation,
                "population": [ind.to_dict() for ind in self.population],
                "best": self.best.to_dict() if self.best else None,
                "initial_time": self.initial_time,
                "initial_best": self.initial_best if math.isfinite(self.initial_best) else None,
                "ideal_time": self.ideal, "evaluations": self.evaluations, "elapsed_s": elapsed,
                "history": [row.to_dict() for row in self.history],
                "remembered": [key.hex() for key in self.remembered], "stalled": self.stalled}

    def load(self, state: dict) -> None:
        self.generation = int(state["generation"])
        self.population = [Individual.from_dict(d) for d in state["population"]]
        self.best = Individual.from_dict(state["best"]) if state.get("best") else None
        self.initial_time = state.get("initial_time")
        ib = state.get("initial_best")
        self.initial_best = math.inf if ib is None else float(ib)
        self.ideal = state.get("ideal_time")
        self.evaluations = int(state["evaluations"])
        self.elapsed_before = float(state["elapsed_s"])
        self.history = [GenerationStats.from_dict(r) for r in state["history"]]
        self.remembered = {bytes.fromhex(key): None for key in state.get("remembered", [])}
        self.stalled = bool(state.get("stalled", False))

    def consider(self, individuals: list[Individual]) -> None:
        self.evaluations += len(individuals)
        for ind in individuals:
            if self.best is None or ind.time < self.best.time:
                self.best = ind

    def record(self, elapsed: float) -> GenerationStats:
        row = GenerationStats.of(elapsed, self.generation, [i.time for i in self.population], self.evaluations)
        self.history.append(row)
        return row


def searched_knobs(policy: Policy, opts: SearchOptions) -> dict:
    """The policy's knobs that are genes: not those the caller held fixed (``policy_options``:
    --swap-only's recompute 0), nor those a fixed value leaves without effect (max_chain then),
    whose values would only breed genomes that plan alike."""
    fixed = dict(opts.policy_options)
    return {name: k for name, k in policy.knobs.items() if name not in fixed and not k.inert_given(fixed)}


def search(facts: GraphFacts, budget: Budget, profile: Profile, options: SearchOptions | None = None,
           policy: Policy | None = None) -> SearchResult:
    """Search schedules and allocations of ``facts.graph`` under ``budget`` (made by
    ``planner.budget.make_budget``, which refuses a budget too small to run) on ``profile``,
    planning each candidate with ``policy`` (default: the registered one that searches).

    Output: the best individual seen, with the initial (unsearched) and ideal times and the
    per-generation history. Raises SearchCheckpointError if ``resume`` finds a checkpoint of
    another search.
    """
    opts = options or SearchOptions()
    graph = facts.graph
    policy = policy or searched()
    ctx = GraphContext.from_facts(facts)
    node_seconds = profile.node_seconds(graph)
    try:
        simple = simple_allocation(facts, budget, profile, node_seconds)
    except PlanError:
        simple = None
    knobs = searched_knobs(policy, opts) if opts.knobs else {}
    variation = Variation(opts.mode, opts.mutation, opts.sigma, opts.schedule_mutation_for(ctx.num_nodes),
                          opts.seeded, opts.locality, knobs, opts.segment, opts.transfer,
                          opts.size_mapping == "unrestricted")
    run = _Run(graph.name, budget, opts, ctx, knobs)
    if opts.resume and opts.checkpoint and os.path.exists(opts.checkpoint):
        state = ckpt.load(opts.checkpoint)
        ckpt.check_state(state, opts.checkpoint)
        ckpt.check_identity(state, run.identity(), opts.checkpoint)
        run.load(state)
    if opts.ideal and run.ideal is None:
        run.ideal = ideal_time(facts, profile, node_seconds)

    # The time limit counts search time only, from here (setup and the ideal plan excluded).
    started = time.monotonic()
    max_generations = opts.max_generations
    time_limit = opts.time_limit_s
    if time_limit is None and max_generations is None:
        time_limit = PAPER_SEARCH_SECONDS
    deadline = None if time_limit is None else started + time_limit

    n_pop = opts.population
    per_generation = opts.children or n_pop
    immigrants = min(round(opts.immigrants * per_generation), per_generation)
    crossovers = -(-(per_generation - immigrants) // variation.children_per_crossover)
    stopped = "generations"
    polished = None
    args = (ctx, facts, profile, budget, policy, node_seconds, variation, opts.seed, simple, opts.allocator,
            opts.allocator_options, opts.policy_options)
    # The bar counts search seconds toward the time limit when there is one (so its ETA is the
    # time left), else generations; the text gives generation, evaluations and the best so far.
    by_time = time_limit is not None
    bar = tqdm(total=round(time_limit) if by_time else max_generations, initial=0 if by_time else run.generation,
               desc=f"ga {graph.name}", unit="s" if by_time else "gen", disable=not opts.progress, leave=False,
               bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} {unit} [{elapsed}<{remaining}{postfix}]" if by_time
               else None)

    def elapsed() -> float:
        return run.elapsed_before + time.monotonic() - started

    def finish_generation() -> None:
        row = run.record(elapsed())
        if opts.checkpoint:
            ckpt.save(opts.checkpoint, run.to_state(elapsed()))
        if by_time:
            bar.n = min(round(time.monotonic() - started), bar.total)
        elif run.generation > 0:
            bar.update(1)
        bar.set_postfix_str(f"generation {run.generation}, {run.evaluations} evaluated, best so far "
                            f"{run.best.time:.4g} s (alive: mean {row.mean:.4g}, worst {row.worst:.4g})")

    if opts.ray_address:
        workers = RayWorkers(make_breeder, args, opts.workers, opts.ray_address)
    else:
        workers = ProcessWorkers(make_breeder, args, opts.workers, opts.start_method)
    try:
        if not run.population:
            try:
                firsts = workers.map(first_task, list(range(n_pop)), deadline)
            except DeadlineReached as e:
                firsts, stopped = e.results, "time"
                if not firsts:
                    firsts = [make_breeder(*args).first(0)]
            run.population = firsts
            run.consider(firsts)
            run.remember(firsts)
            run.initial_best = min(i.time for i in firsts)
            unsearched = opts.seeded and simple is not None and math.isfinite(firsts[0].time)
            run.initial_time = firsts[0].time if unsearched else None
            finish_generation()
        while stopped == "generations" and (max_generations is None or run.generation < max_generations):
            if deadline is not None and time.monotonic() >= deadline:
                stopped = "time"
                break
            if opts.max_evaluations is not None and run.evaluations >= opts.max_evaluations:
                stopped = "evaluations"
                break
            gen = run.generation + 1
            chosen = pairs(len(run.population), crossovers, rng_for(opts.seed, gen, 0, PAIR))
            per = variation.children_per_crossover
            known = run.known()
            if run.stalled:     # the last generation bred only known genomes: draw at random instead
                tasks = [(gen, k, IMMIGRANT, None, None, known) for k in range(per_generation)]
            else:
                tasks = [(gen, k, c, run.population[i], run.population[j], known)
                         for k, (i, j) in enumerate(chosen) for c in range(per)]
                tasks += [(gen, k, IMMIGRANT, None, None, known) for k in range(immigrants)]
            if opts.max_evaluations is not None:
                tasks = tasks[:max(opts.max_evaluations - run.evaluations, 0)]
            try:
                children = workers.map(child_task, tasks, deadline)
            except DeadlineReached as e:
                children, stopped = e.results, "time"
            children = [c for c in children if c is not None]   # None: only known genomes could be bred
            if tasks and not children and stopped == "generations":
                if run.stalled:
                    stopped = "converged"   # neither breeding nor random draws found anything new
                run.stalled = True
            else:
                run.stalled = False
            run.consider(children)
            run.remember(children)
            everyone = run.population + distinct_plans(run.population, children)
            times = [i.time for i in everyone]
            keep = select(times, run.best.time, n_pop, rng_for(opts.seed, gen, 0, SELECT), opts.elites,
                          opts.temperature)
            run.population = [everyone[i] for i in keep]
            run.generation = gen
            finish_generation()
        # (An ablation holds the knobs at their defaults: nothing to polish there.)
        if opts.polish and knobs and opts.mode == "both" and run.best is not None and math.isfinite(run.best.time):
            bar.set_postfix_str(f"polishing the best genome's knobs (best so far {run.best.time:.4g} s)")
            if workers.alive:
                def evaluate(tasks):
                    return workers.map(evaluate_task, tasks)
            else:       # a deadline terminated the workers mid-generation: polish in this process
                local = make_breeder(*args)

                def evaluate(tasks):
                    return [evaluate_task(local, task) for task in tasks]
            polished = polish(run.best, knobs, evaluate)
            run.best = polished.after
    except KeyboardInterrupt:
        stopped = "interrupted"
    finally:
        workers.terminate()
        bar.close()
    if not run.population:
        raise KeyboardInterrupt
    best = run.best
    return SearchResult(best.schedule.tolist(), best.allocation, best.time, run.initial_time,
                        run.initial_best, run.ideal, run.generation, run.evaluations, elapsed(), stopped,
                        opts.mode, run.history, run.population, dict(best.options),
                        policy.placed_by(opts.allocator), tuple(opts.allocator_options), tuple(opts.policy_options),
                        polished)
