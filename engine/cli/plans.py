"""From the run configuration to verified Programs: the model, the budget, the profile, and
each policy's plan (searched, loaded or made), simulated.

Nothing here executes a Program; only the default profile is measured, on the backend
that will run (``engine.backend_registry``).
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

from planner.bounds import Bounds, lower_bounds
from planner.budget import AUTO, POOL, Budget, make_budget, smallest_budget, smallest_that_plans
from planner.facts import GraphFacts
from planner.policy import PlanRequest, Policy, unlimited_program
from planner.simulate import Timeline, simulate
from planner.stalls import Stalls, stall_report
from planner.verify import verify

from ..autodiff import make_optimizer
from ..backend_registry import Placement
from ..files import read_json
from ..graph_io import fingerprint
from ..ir import Graph, Kind
from ..profile import DEVICES, Profile, analytic_profile
from ..program import Program, ProgramFormatError
from ..units import format_bytes
from .config import RunConfig
from .flags import UsageError

SMALL_MODELS = ("small-cnn", "small-lstm")
DEFAULT_BUDGET_FRACTION = 0.3      # of the unlimited-memory peak, when --memory is not given


def build_model(cfg: RunConfig) -> Graph:
    return model_graph(cfg.model, cfg.batch, cfg.size, cfg.dtype, cfg.optimizer, cfg.lr, cfg.momentum,
                       cfg.weight_decay)


def model_graph(model: str, batch: int | None = None, size: int | None = None, dtype: str = "float32",
                optimizer: str | None = None, lr: float | None = None, momentum: float = 0.9,
                weight_decay: float = 1e-4) -> Graph:
    """The training graph of a model named as --model names it (small-cnn, small-lstm or a zoo
    name); UsageError (one line) for an unknown name."""
    name = model.lower()
    import zoo

    try:
        kind = optimizer or ("sgd" if name in SMALL_MODELS else zoo.default_optimizer(name))
    except ValueError as e:
        raise UsageError(f"--model {model}: {e} (or {', '.join(SMALL_MODELS)})") from None
    sgd = make_optimizer(kind, lr, momentum, weight_decay)
    if name in SMALL_MODELS:
        from zoo import small

        kw = {"dtype": dtype, "sgd": sgd}
        if batch:
            kw["batch"] = batch
        if name == "small-cnn":
            return small.residual_cnn(**({"image": size} if size else {}), **kw)
        return small.lstm(**({"steps": size} if size else {}), **kw)
    try:
        return zoo.build(name, batch=batch, size=size, dtype=dtype, optimizer=sgd)
    except ValueError as e:
        raise UsageError(f"--model {model}: {e} (or {', '.join(SMALL_MODELS)})") from None


def batch_of(g: Graph) -> int:
    return next((g.tensors[t].shape[0] for t in g.leaves(Kind.INPUT)), 0)


def choose_profile(cfg: RunConfig, facts: GraphFacts, placement: Placement | None, data,
                   loaded: Profile | None = None) -> Profile:
    """--profile (a device name, or a file: ``loaded`` when already read), else analytic v100
    with --simulate-only, else measured on the chosen backend with the unlimited program."""
    if cfg.profile:
        if cfg.profile.lower() in DEVICES:
            return analytic_profile(cfg.profile)
        return loaded or Profile.load(cfg.profile)
    if cfg.simulate_only:
        return analytic_profile("v100")
    ideal = unlimited_program(facts.graph, facts)
    return placement.kind.measure_profile(placement, facts.graph, ideal, cfg.seed, data)


def budget_allocators(cfg: RunConfig) -> set[str]:
    """The allocators the planned policies place tensors with (the pool if none needs a budget)."""
    return {cfg.allocator_of(p)[0] for p in cfg.planned if p.needs_budget} or {POOL}


def choose_budget(cfg: RunConfig, facts: GraphFacts) -> Budget:
    """--memory (PlanError if it cannot run the graph), else 0.3 of the unlimited peak or the
    smallest budget that runs, whichever is larger. The smallest is that of the allocators the
    planned policies place tensors with (a policy that cannot run then says so itself)."""
    allocators = budget_allocators(cfg)
    if cfg.memory is not None:
        return make_budget(facts, cfg.memory, allocators)
    least = smallest_budget(facts, allocators)
    return make_budget(facts, max(least, int(DEFAULT_BUDGET_FRACTION * facts.peak_bytes)), allocators)


def grow_default_budget(cfg: RunConfig, facts: GraphFacts, budget: Budget, profile: Profile) -> tuple[Budget, dict]:
    """Without --memory: the budget grown, if it must be, until every planned policy on an
    online allocator plans (the pool's smallest budget is exact, theirs is not: best fit
    fragments, lms keeps parameters resident), so that the default runs every policy asked
    for; and the Programs those policies made at the budget returned, for ``plan_policies`` to
    reuse. With --memory: the budget as given (a policy that cannot run there says so)."""
    if cfg.memory is not None:
        return budget, {}
    secs = None
    made: dict[str, tuple[int, Program]] = {}
    for policy in cfg.planned:
        allocator, options = cfg.allocator_of(policy)
        if not policy.needs_budget or policy is cfg.searching or allocator in (POOL, AUTO):
            continue
        secs = profile.node_seconds(facts.graph) if secs is None else secs

        def make(b: Budget, policy=policy, allocator=allocator, options=options) -> Program:
            return policy.make(PlanRequest(facts.graph, facts, b, profile, secs, allocator=allocator,
                                           allocator_options=options, policy_options=cfg.policy_options))

        def refused(n: int, e, name=policy.name) -> None:
            print(f"budget {format_bytes(n)}: {name} finds no room; trying more", flush=True)

        grown, program = smallest_that_plans(facts, budget.device_bytes, budget_allocators(cfg), make, refused)
        if grown.device_bytes > budget.device_bytes:
            print(f"budget raised to {format_bytes(grown.device_bytes)} "
                  f"({grown.device_bytes / facts.peak_bytes:.2f} of peak): the least at which {policy.name} "
                  f"plans (to within 2% of the peak); --memory sets the budget", flush=True)
            budget = grown
        made[policy.name] = (budget.device_bytes, program)
    return budget, {name: program for name, (n, program) in made.items() if n == budget.device_bytes}


def read_plan(path: str) -> Program:
    """A saved Program, parsed (its safety is planner.verify's question, asked before it runs)."""
    d = read_json(path, "plan file", UsageError, "a JSON file --save-plan wrote")
    try:
        return Program.from_dict(d)
    except ProgramFormatError as e:
        raise UsageError(f"plan file '{path}': {e}") from None
    except (AttributeError, IndexError) as e:      # shapes from_dict does not expect
        raise UsageError(f"plan file '{path}': malformed program description ({e})") from None


def load_plan(path: str, g: Graph, program: Program | None = None) -> Program:
    """``program`` (already read from ``path``) or the file, checked to be made for ``g``."""
    program = program or read_plan(path)
    if program.graph_fingerprint != fingerprint(g):
        raise UsageError(f"plan file '{path}' was made for another graph ('{program.graph_name}' with other "
                         "shapes or structure); use the same --model, --batch, --size and --dtype")
    return program


def searched_program(cfg: RunConfig, policy: Policy, request: PlanRequest, out_dir: str,
                     loaded: Program | None = None, effort: dict | None = None) -> Program:
    """The searching policy's Program: loaded, or searched (schedule and allocation), or
    unsearched. ``effort`` (a dict) receives what the search did, for the report."""
    effort = {} if effort is None else effort
    effort.update(policy=policy.name, loaded_plan=cfg.load_plan, generations=0, evaluations=0, elapsed_s=0.0,
                  stopped="loaded" if cfg.load_plan else "no search", best_s=None, initial_s=None,
                  population=cfg.search.population, seconds_limit=cfg.search.seconds or None,
                  generations_limit=cfg.search.generations)
    if cfg.load_plan:
        return load_plan(cfg.load_plan, request.graph, loaded)
    if not cfg.search.wanted:
        return policy.make(request)
    from ga.search import SearchOptions, search

    s = cfg.search
    opts = SearchOptions(population=s.population, seed=cfg.seed, workers=s.workers, ray_address=s.ray_address,
                         time_limit_s=s.seconds or None, max_generations=s.generations,
                         checkpoint=s.checkpoint, resume=s.resume, allocator=request.allocator,
                         allocator_options=tuple(request.allocator_options.items()),
                         progress=not cfg.quiet and sys.stderr.isatty())   # no bar in a piped log
    result = search(request.facts, request.budget, request.profile, opts, policy)
    os.makedirs(out_dir, exist_ok=True)
    result.write_history(os.path.join(out_dir, "search.csv"))
    plotted = result.plot(os.path.join(out_dir, "search.png"), title=request.graph.name)
    effort.update(generations=result.generations, evaluations=result.evaluations, elapsed_s=result.elapsed_s,
                  stopped=result.stopped, best_s=result.best_time, initial_s=result.initial_time)
    initial = f"{result.initial_time:.4f}" if result.initial_time is not None else "does not fit"
    print(f"search {result.generations} generations, {result.evaluations} candidates in "
          f"{result.elapsed_s:.1f} s ({result.stopped}): best simulated {result.best_time:.4f} s/iter, "
          f"default order with the simple allocation {initial}; log {out_dir}/search.csv"
          + (" and search.png" if plotted else " (no plot: matplotlib is not installed; pip install '.[plot]')"))
    if result.generations == 0 and result.stopped != "generations":     # cut short, not asked for 0
        print(f"search: NOT ONE GENERATION finished ({result.evaluations} of {s.population} first candidates "
              f"evaluated): the plan is the best of those, not a searched one; give more --search-seconds or a "
              f"smaller --population")
    return policy.make(result.request(request.graph, request.facts, request.budget, request.profile,
                                      request.node_seconds))


def plan_policies(cfg: RunConfig, facts: GraphFacts, budget: Budget, profile: Profile, out_dir: str,
                  loaded: Program | None = None, effort: dict | None = None, made: dict | None = None) -> dict:
    """{policy name: (Program, simulated Timeline)} for every policy that makes a Program, each
    verified against the budget it was made for. ``made``: Programs already made at this
    budget, by policy name (``grow_default_budget``'s)."""
    g = facts.graph
    secs = profile.node_seconds(g)
    programs = {}
    for policy in cfg.planned:
        t0 = time.perf_counter()
        limit = budget if policy.needs_budget else None
        allocator, options = cfg.allocator_of(policy)
        request = PlanRequest(g, facts, limit, profile, secs, allocator=allocator, allocator_options=options,
                              policy_options=cfg.policy_options)
        if policy is cfg.searching:
            program = searched_program(cfg, policy, request, out_dir, loaded, effort)
        elif made and policy.name in made:
            program = made[policy.name]
        else:
            program = policy.make(request)
        verify(program, g, limit.device_bytes if limit else None)
        sim = simulate(program, g, profile, secs)
        placed = program.arena.allocator.get("name", "?")
        print(f"plan   {policy.name:12s} {len(program.instrs)} instructions ({placed}), verified, simulated "
              f"{sim.total:.4f} s/iter ({time.perf_counter() - t0:.2f} s to plan)", flush=True)
        programs[policy.name] = (program, sim)
    return programs


@dataclass(frozen=True)
class PlanQuality:
    """How good one simulated Program is: the lower bound of its order under the budget it
    was planned for, and where its iteration stalls."""
    bounds: Bounds
    stalls: Stalls


def plan_bounds(program: Program, facts: GraphFacts, budget: Budget | None, profile: Profile,
                node_seconds=None) -> Bounds:
    """The lower bounds of ``program``: ``facts`` are of the graph in some order; the bounds are
    taken in the Program's own order (a search may have chosen another)."""
    ordered = facts if list(program.schedule) == facts.order else GraphFacts(facts.graph, program.schedule)
    return lower_bounds(ordered, budget, profile, node_seconds)


def plan_quality(program: Program, sim: Timeline, facts: GraphFacts, budget: Budget | None, profile: Profile,
                 node_seconds=None) -> PlanQuality:
    """``plan_bounds`` and where the simulated iteration stalls."""
    return PlanQuality(plan_bounds(program, facts, budget, profile, node_seconds),
                       stall_report(program, facts.graph, sim))


def assess_plans(cfg: RunConfig, facts: GraphFacts, budget: Budget, profile: Profile, programs: dict) -> dict:
    """{policy name: PlanQuality} for every planned policy. A policy that needs no budget (the
    unlimited plan) is bounded without one: it was not planned to fit the run's budget."""
    secs = profile.node_seconds(facts.graph)
    return {p.name: plan_quality(*programs[p.name], facts, budget if p.needs_budget else None, profile, secs)
            for p in cfg.planned if p.name in programs}
