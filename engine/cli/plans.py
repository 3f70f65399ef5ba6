"""From the run configuration to verified Programs: the model, the budget, the profile, and
each policy's plan (searched, loaded or made), simulated. Every planning decision is
engine/library/planning.py's; this module reads the configuration and says what happened.

Nothing here executes a Program; only the default profile is measured, on the backend
that will run (``engine.backend_registry``).
"""
from __future__ import annotations

import contextlib
import os
import sys
import time

from planner.budget import Budget
from planner.budget_ladder import faster_of, ladder_program, on_ladder, rungs_reported
from planner.facts import GraphFacts
from planner.policy import PlanRequest, Policy, unlimited_program

from ..backend_registry import Placement
from ..files import read_json
from ..graph_io import fingerprint
from ..heartbeat import heartbeat
from ..ir import Graph
from ..library import planning
from ..library.models import batch_of, model_graph  # noqa: F401  (batch_of: for run.py)
from ..library.planning import plan_quality
from ..profile import DEVICES, Profile, analytic_profile
from ..program import Program, ProgramFormatError
from ..units import format_bytes
from .config import RunConfig
from .flags import UsageError


def build_model(cfg: RunConfig) -> Graph:
    return model_graph(cfg.model, cfg.batch, cfg.size, cfg.dtype, cfg.optimizer, cfg.lr, cfg.momentum,
                       cfg.weight_decay)


ANALYTIC_DEFAULT = "v100"       # --profile's default where nothing runs before planning


def resolve_profile(spec: str | None, placement: Placement | None, g: Graph, seed: int, data=None,
                    loaded: Profile | None = None, facts: GraphFacts | None = None) -> Profile:
    """--profile, the same rule in every command: a device name (an analytic profile) or a file
    (``loaded`` when already read); by default measured on ``placement`` by the unlimited
    program, or analytic v100 where nothing runs first (``placement`` None)."""
    if spec:
        if spec.lower() in DEVICES:
            return analytic_profile(spec)
        return loaded or Profile.load(spec)
    if placement is None:
        return analytic_profile(ANALYTIC_DEFAULT)
    ideal = unlimited_program(g, facts)
    return placement.kind.measure_profile(placement, g, ideal, seed, data)


def choose_profile(cfg: RunConfig, facts: GraphFacts, placement: Placement | None, data,
                   loaded: Profile | None = None) -> Profile:
    """engine.train's profile (``resolve_profile``; with --simulate-only nothing runs first)."""
    return resolve_profile(cfg.profile, None if cfg.simulate_only else placement, facts.graph, cfg.seed, data,
                           loaded, facts)


def profile_source(spec: str | None, profile: Profile) -> dict:
    """What produced the simulated times (``spec``: --profile as given): the report names it."""
    if spec and spec.lower() in DEVICES or (not spec and profile.analytic is not None):
        return {"source": "analytic", "device": profile.device, "path": None}
    if spec:
        return {"source": "file", "device": profile.device, "path": spec}
    return {"source": "measured", "device": profile.device, "path": None}


def describe_profile(source: dict, unit: str = "s/iter") -> str:
    if source["source"] == "analytic":
        return f"analytic {source['device']} (peak rates, no measurement): sim {unit} is that device's"
    if source["source"] == "file":
        return f"from {source['path']} (device {source['device']}): sim {unit} is that device's"
    return f"measured on this machine's {source['device']} backend: sim {unit} is this machine's"


def budget_allocators(cfg: RunConfig) -> set[str]:
    """The allocators the planned policies place tensors with (none if none needs a budget)."""
    return {cfg.allocator_of(p)[0] for p in cfg.planned if p.needs_budget}


def choose_budget(cfg: RunConfig, facts: GraphFacts) -> Budget:
    """--memory, or the default budget (``planning.choose_budget``) for the allocators the
    planned policies place tensors with."""
    return planning.choose_budget(facts, cfg.memory, budget_allocators(cfg))


def requests(cfg: RunConfig, facts: GraphFacts, budget: Budget | None, profile: Profile, secs=None):
    """(policy, PlanRequest) for every planned policy, as --allocator, --chunk-mib and the
    policies' own flags say; a policy that needs no budget gets none."""
    secs = profile.node_seconds(facts.graph) if secs is None else secs
    out = []
    for policy in cfg.planned:
        allocator, options = cfg.allocator_of(policy)
        out.append((policy, PlanRequest(facts.graph, facts, budget if policy.needs_budget else None, profile, secs,
                                        allocator=allocator, allocator_options=options,
                                        policy_options=cfg.policy_options)))
    return out


def grow_default_budget(cfg: RunConfig, facts: GraphFacts, budget: Budget, profile: Profile) -> tuple[Budget, dict]:
    """Without --memory: the budget grown where a planned policy finds no room
    (``planning.grow_budget``), saying so, and the Programs made there; with --memory: the
    budget as given (a policy that cannot run there says so)."""
    if cfg.memory is not None:
        return budget, {}

    def refused(policy: Policy, n: int, e) -> None:
        print(f"budget {format_bytes(n)}: {policy.name} finds no room; trying more", flush=True)

    def raised(policy: Policy, grown: Budget) -> None:
        print(f"budget raised to {format_bytes(grown.device_bytes)} "
              f"({grown.device_bytes / facts.peak_bytes:.2f} of peak): the least at which {policy.name} "
              f"plans (to within 2% of the peak); --memory sets the budget", flush=True)

    growing = [(p, r) for p, r in requests(cfg, facts, budget, profile) if p is not cfg.searching]
    return planning.grow_budget(facts, budget, growing, budget_allocators(cfg), refused, raised)


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
        return ladder_program(policy, request)
    from ga.search import SearchOptions

    s = cfg.search
    opts = SearchOptions(population=s.population, seed=cfg.seed, workers=s.workers, ray_address=s.ray_address,
                         time_limit_s=s.seconds or None, max_generations=s.generations,
                         checkpoint=s.checkpoint, resume=s.resume,
                         progress=not cfg.quiet and sys.stderr.isatty())   # no bar in a piped log
    best, result = planning.searched_request(policy, request, opts)
    os.makedirs(out_dir, exist_ok=True)
    result.write_history(os.path.join(out_dir, "search.csv"))
    plotted = result.plot(os.path.join(out_dir, "search.png"), request.graph.name, policy.name,
                          request.budget.device_bytes,
                          note=f"population {s.population}, seed {cfg.seed}, profile {request.profile.device}"
                          f"; allocator {result.allocator or 'the policy default'}")
    effort.update(generations=result.generations, evaluations=result.evaluations, elapsed_s=result.elapsed_s,
                  stopped=result.stopped, best_s=result.best_time, initial_s=result.initial_time)
    initial = f"{result.initial_time:.4f}" if result.initial_time is not None else "does not fit"
    knobs = result.knobs_chosen()
    print(f"search {result.generations} generations, {result.evaluations} candidates in "
          f"{result.elapsed_s:.1f} s ({result.stopped}): best simulated {result.best_time:.4f} s/iter"
          + (f" ({knobs})" if knobs else "") +
          f", default order with the simple allocation {initial}; log {out_dir}/search.csv"
          + (" and search.png" if plotted else " (no plot: matplotlib is not installed; pip install '.[plot]')"))
    if result.polished is not None and result.polished.improved:
        print(f"search: polishing the best genome's knobs gained: {result.polished.describe()}")
    if result.generations == 0 and result.stopped != "generations":     # cut short, not asked for 0
        print(f"search: NOT ONE GENERATION finished ({result.evaluations} of {s.population} first candidates "
              f"evaluated): the plan is the best of those, not a searched one; give more --search-seconds or a "
              f"smaller --population")
    program, ladder_s = faster_of(policy, request, lambda: policy.make(best), result.best_time)
    if ladder_s is not None:
        print(f"search: the unsearched plan on the budget ladder is faster ({ladder_s:.4f} s/iter, within "
              f"{format_bytes(program.arena.arena_bytes)}); it is the plan")
    return program


def plan_policies(cfg: RunConfig, facts: GraphFacts, budget: Budget, profile: Profile, out_dir: str,
                  loaded: Program | None = None, effort: dict | None = None, made: dict | None = None) -> dict:
    """{policy name: (Program, simulated Timeline)} for every policy that makes a Program, each
    verified against the budget it was made for. ``made``: Programs already made at this
    budget, by policy name (``grow_default_budget``'s)."""
    programs = {}
    for policy, request in requests(cfg, facts, budget, profile):
        t0 = time.perf_counter()
        with rungs_reported(None if cfg.quiet else ladder_heartbeat(policy.name, HEARTBEAT_S)), \
                still_planning(policy.name, quiet=cfg.quiet or policy is cfg.searching or on_ladder(policy, request)):
            if policy is cfg.searching:
                program = searched_program(cfg, policy, request, out_dir, loaded, effort)
            else:
                program = (made or {}).get(policy.name)
            program, sim = planning.verified(policy, request, program)
        placed = program.arena.allocator.get("name", "?")
        if program.arena.allocator.get("chunk_bytes"):
            placed += f", {format_bytes(program.arena.allocator['chunk_bytes'])} chunks"
        if program.recomputes:
            placed += f", {program.recomputes} recomputations"
        print(f"plan   {policy.name:12s} {len(program.instrs)} instructions ({placed}), verified, simulated "
              f"{sim.total:.4f} s/iter ({time.perf_counter() - t0:.2f} s to plan)", flush=True)
        programs[policy.name] = (program, sim)
    return programs


# A walk down the budget ladder longer than this says where it is, this often (checkpoint on
# NasNet-25 walks 46 rungs in about 5 minutes).
HEARTBEAT_S = 5.0


def still_planning(policy_name: str, quiet: bool):
    """A line on stderr after HEARTBEAT_S seconds of planning and verifying one policy's Program,
    and every 3 HEARTBEAT_S after (lms on NasNet-25 plans for about a minute, a refusal of
    smartswap's at a budget far too small can take minutes); nothing where ``quiet`` (also where
    the search or the budget ladder's walk reports instead)."""
    if quiet:
        return contextlib.nullcontext()
    return heartbeat(lambda s: f"plan   {policy_name}: still planning ({s:.0f} s)", HEARTBEAT_S, 3 * HEARTBEAT_S)


def ladder_heartbeat(policy_name: str, every_s: float):
    """A rung reporter for ``rungs_reported``: a line on stderr each ``every_s`` seconds of a
    walk down the budget ladder."""
    started = time.monotonic()
    last = [started]

    def report(tried: int, device_bytes: int, seconds: float | None, best: tuple | None) -> None:
        now = time.monotonic()
        if now - last[0] < every_s:
            return
        last[0] = now
        this = f"{seconds:.4f} s/iter" if seconds is not None else "does not plan"
        so_far = (f"best so far {best[0]:.4f} s/iter within {format_bytes(best[1])}" if best
                  else "none planned yet")
        print(f"plan   {policy_name}: budget ladder, rung {tried} at {format_bytes(device_bytes)}: {this}; {so_far} "
              f"({now - started:.0f} s; rungs below are tried until the lower bound rules them out)",
              file=sys.stderr, flush=True)
    return report


def assess_plans(cfg: RunConfig, facts: GraphFacts, budget: Budget, profile: Profile, programs: dict) -> dict:
    """{policy name: PlanQuality} for every planned policy. A policy that needs no budget (the
    unlimited plan) is bounded without one: it was not planned to fit the run's budget."""
    secs = profile.node_seconds(facts.graph)
    return {p.name: plan_quality(*programs[p.name], facts, budget if p.needs_budget else None, profile, secs)
            for p in cfg.planned if p.name in programs}
