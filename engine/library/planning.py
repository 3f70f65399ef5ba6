"""The one home of planning: from a graph and a memory budget to verified, simulated and
bounded plans. The command line (engine/cli/plans.py, run.py), ``engine.api``, ``engine.infer``,
``engine.serve`` and the benches all plan through it; they decide only what to print.

The steps, each one function:

- ``choose_budget``: ``--memory``, or ``DEFAULT_BUDGET_FRACTION`` of the unlimited peak (at
  least the smallest budget that runs on the allocators the policies place tensors with);
- ``grow_budget``: without ``--memory``, the budget raised until every policy whose allocator's
  least budget is only a bound (an online allocator: best fit fragments, lms keeps parameters
  resident) plans, with the Programs made there;
- ``searched_request``: ``ga.search`` for the policy that searches (its schedule, allocation and
  knobs as a PlanRequest);
- ``verified``: a policy's Program made (or given), verified against its budget, simulated;
- ``plan_bounds``/``plan_quality``: the lower bounds of a Program's own order, its stalls.

``plan`` composes them for one policy; ``plan_named`` takes names and strings (``engine.api.plan``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable, Mapping, Sequence

from allocator.registry import check_options, smallest_is_exact, takes_option
from planner.bounds import Bounds, lower_bounds
from planner.budget import Budget, make_budget, smallest_budget, smallest_that_plans
from planner.budget_ladder import faster_of, ladder_program, rung_planned
from planner.facts import GraphFacts
from planner.policy import REGISTRY, PlanRequest, Policy, check_allocator, get
from planner.simulate import Timeline, simulate
from planner.stalls import Stalls, stall_report
from planner.verify import verify

from ..errors import EngineError
from ..ir import Graph
from ..profile import DEVICES, Profile, analytic_profile
from ..program import SWAP_IN, SWAP_OUT, Program
from ..units import parse_bytes

DEFAULT_BUDGET_FRACTION = 0.3      # of the unlimited-memory peak, when no budget is given


def choose_budget(facts: GraphFacts, memory: int | None, allocators: Iterable[str]) -> Budget:
    """``memory`` device bytes (PlanError if they cannot run the graph), else
    DEFAULT_BUDGET_FRACTION of the unlimited peak or the smallest budget that runs on
    ``allocators``, whichever is larger (a policy that cannot plan there says so itself)."""
    allocators = list(allocators)
    if memory is not None:
        return make_budget(facts, memory, allocators)
    least = smallest_budget(facts, allocators)
    return make_budget(facts, max(least, int(DEFAULT_BUDGET_FRACTION * facts.peak_bytes)), allocators)


def grows(request: PlanRequest, policy: Policy) -> bool:
    """Whether a default budget is grown for ``policy``: it needs one, does not search (a search
    holds its budget), and its allocator's least budget is a bound, not exact, or the policy may
    not plan there (``Policy.plans_at_smallest_budget``)."""
    exact = smallest_is_exact([policy.placed_by(request.allocator)])
    return policy.needs_budget and not policy.searches and (not exact or not policy.plans_at_smallest_budget)


def grow_budget(facts: GraphFacts, budget: Budget, requests: Sequence[tuple[Policy, PlanRequest]],
                allocators: Iterable[str], on_refused: Callable[[Policy, int, Exception], None] | None = None,
                on_raised: Callable[[Policy, Budget], None] | None = None) -> tuple[Budget, dict[str, Program]]:
    """A default ``budget`` grown, if it must be, until every policy in ``requests`` (each with
    its request, whose budget is replaced) for which ``grows`` plans (to within 2% of the peak:
    ``planner.budget.smallest_that_plans``), so that the default runs every policy asked for;
    and the Programs those policies made at the budget returned, by policy name, to reuse.
    ``on_refused(policy, bytes, error)`` hears each budget that did not plan, ``on_raised``
    each raise."""
    allocators = list(allocators)
    made: dict[str, tuple[int, Program]] = {}
    for policy, request in requests:
        if not grows(request, policy):
            continue

        def make(b: Budget, policy=policy, request=request) -> Program:
            # at the ladder's rung at or below b where the policy plans there: the budget found
            # then plans when given as --memory too (the ladder plans at its rungs only)
            return policy.make(rung_planned(policy, replace(request, budget=b)))

        def refused(n: int, e, policy=policy) -> None:
            if on_refused is not None:
                on_refused(policy, n, e)

        grown, program = smallest_that_plans(facts, budget.device_bytes, allocators, make, refused)
        if grown.device_bytes > budget.device_bytes:
            budget = grown
            if on_raised is not None:
                on_raised(policy, budget)
        made[policy.name] = (budget.device_bytes, program)
    return budget, {name: program for name, (n, program) in made.items() if n == budget.device_bytes}


def searched_request(policy: Policy, request: PlanRequest, options):
    """(the PlanRequest of the best individual, the ga.search SearchResult) of a genetic search
    of ``policy``'s schedule, allocation and knobs under ``request``'s budget (``options``: a
    ga.search.SearchOptions; its allocator is the request's)."""
    from ga.search import search

    options = replace(options, allocator=request.allocator,
                      allocator_options=tuple(dict(request.allocator_options).items()),
                      policy_options=tuple(dict(request.policy_options).items()))
    result = search(request.facts, request.budget, request.profile, options, policy)
    return result.request(request.graph, request.facts, request.budget, request.profile,
                          request.op_seconds), result


def verified(policy: Policy, request: PlanRequest, program: Program | None = None) -> tuple[Program, Timeline]:
    """``program`` (None: ``policy``'s, made on the budget ladder where it plans there:
    ``planner.budget_ladder.ladder_program``), verified against the request's budget and
    simulated on its profile."""
    program = ladder_program(policy, request) if program is None else program
    verify(program, request.graph, request.budget.device_bytes if request.budget else None)
    return program, simulate(program, request.graph, request.profile, request.op_seconds)


@dataclass(frozen=True)
class Plan:
    """A verified Program and its simulated iteration."""
    policy: str
    program: Program
    timeline: Timeline
    budget: Budget | None          # None for a policy that needs no budget (ideal)
    graph: Graph

    @property
    def seconds(self) -> float:
        """Simulated seconds per iteration, on the plan's profile."""
        return float(self.timeline.total)

    @property
    def h2d_bytes(self) -> int:
        return self.program.bytes_moved(self.graph, SWAP_IN)

    @property
    def d2h_bytes(self) -> int:
        return self.program.bytes_moved(self.graph, SWAP_OUT)


def plan(graph: Graph, policy: Policy, profile: Profile, memory: int | None = None, *, allocator: str | None = None,
         allocator_options: Mapping[str, object] | None = None, policy_options: Mapping[str, object] | None = None,
         search=None, facts: GraphFacts | None = None, on_search=None) -> Plan:
    """``policy``'s verified, simulated Plan of ``graph`` on ``profile`` under ``memory`` device
    bytes (None: ``choose_budget``'s default, grown as ``grow_budget`` grows it), its tensors
    placed by ``allocator`` (None: its default). ``search`` (ga.search.SearchOptions) runs the
    genetic search first, for a policy that searches; ``on_search`` then hears its SearchResult."""
    if not policy.runs_program:
        raise EngineError(f"policy '{policy.name}' runs no Program; plan with one of "
                          f"{', '.join(n for n, p in REGISTRY.items() if p.runs_program)}")
    if allocator is not None and policy.needs_budget:
        check_allocator(policy, allocator)
    facts = facts or GraphFacts(graph)
    request = PlanRequest(graph, facts, None, profile, profile.node_seconds(graph), allocator=allocator,
                          allocator_options=dict(allocator_options or {}), policy_options=dict(policy_options or {}))
    if not policy.needs_budget:
        return Plan(policy.name, *verified(policy, request), None, graph)
    placed = [policy.placed_by(allocator)]
    budget = choose_budget(facts, memory, placed)
    made: dict[str, Program] = {}
    if memory is None:
        budget, made = grow_budget(facts, budget, [(policy, request)], placed)
    request = replace(request, budget=budget)
    program = made.get(policy.name)
    if search is not None and policy.searches:
        unsearched = request
        request, result = searched_request(policy, request, search)
        if on_search is not None:
            on_search(result)
        program, _ = faster_of(policy, unsearched, lambda: policy.make(request), result.best_time)
    return Plan(policy.name, *verified(policy, request, program), budget, graph)


def profile_of(spec: str | Profile = "v100") -> Profile:
    """A profile: a device name for an analytic one (v100, h100), a JSON file that
    ``--save-profile`` wrote, or a Profile as is."""
    if isinstance(spec, Profile):
        return spec
    if spec.lower() in DEVICES:
        return analytic_profile(spec)
    return Profile.load(spec)


def plan_named(graph: Graph, policy: str, memory: int | str | None = None, profile: str | Profile = "v100",
               search_seconds: float = 0.0, seed: int = 0, allocator: str | None = None,
               chunk_bytes: int | None = None) -> Plan:
    """``plan`` from names and strings (``engine.api.plan``): a registered policy, ``memory`` as
    bytes or "64MiB", a profile as ``profile_of`` reads it, ``search_seconds`` of genetic search
    on one worker, ``chunk_bytes`` for an allocator that takes it (va, auto)."""
    chosen = get(policy)
    options = {}
    if chunk_bytes is not None:
        if not takes_option(allocator, "chunk_bytes"):
            raise EngineError(f"chunk_bytes sizes the chunks of allocator va (or auto), not {allocator}")
        check_options(allocator, chunk_bytes=chunk_bytes)
        options["chunk_bytes"] = int(chunk_bytes)
    search = None
    if search_seconds and chosen.searches:
        from ga.search import SearchOptions
        search = SearchOptions(seed=seed, time_limit_s=search_seconds, workers=1, progress=False)
    return plan(graph, chosen, profile_of(profile), parse_bytes(memory) if isinstance(memory, str) else memory,
                allocator=allocator, allocator_options=options, search=search)


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
