"""One budget knob that behaves: a policy's plan never gets slower when the budget grows.

The planners are heuristics and not monotone in the budget: a few more bytes change the simple
allocation's object counts and with them which tensor the swap pass evicts, and the plan can be
slower (tiny ResNet: swapadvisor +0.7%, capuchin +1.4% at one step of ten; tests/planner/
test_budget_sweep.py). PyTorch's memory-budget knob has the same defect (pytorch issue 197838).

A Program planned within fewer bytes also runs within more. So a policy that plans on the
ladder (``Policy.budget_ladder``, read by ``on_ladder`` alone) plans, for a budget
of B device bytes, at the rungs of one fixed ladder at or below B and keeps the fastest. The
ladder does not depend on B, so a larger budget sees every rung a smaller one saw: its plan is
never slower (a budget no rung plans counts as infinitely slow; only budgets below one that
plans can be refused).

- The rungs: 2**(k / STEPS_PER_OCTAVE) device bytes (every power of two among them, 16 GiB
  too), the smallest budget that runs (so it still plans) and the budget that holds the
  unlimited allocation (above it nothing changes). A budget between two rungs is planned at
  the rung below: at most one step (4.4%) of it unused.
- The walk down stops at the first rung whose lower bound (``planner.bounds``, recomputing
  allowed, for the graph's own order) is no less than the fastest plan found: a Program within
  that rung's bytes or fewer is a Program within that rung's bytes, so none below can be faster.
  Where the link is slow the bound rises fast as the budget falls and the walk is short; where
  copies hide behind compute it stays below the plans and the walk goes down to the smallest
  budget (one plan per rung: that is the price of the guarantee).

Only the unsearched plan (the graph's own order, no allocation given) with a profile to time
plans is walked; a searched candidate is planned at its budget as given (its allocation is
that budget's), and so is a plan without a profile (nothing to compare).
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from typing import Callable, Iterator

from .bounds import lower_bounds
from .allocation import unlimited_allocation
from .budget import Budget, smallest_budget
from .errors import PlanError
from .facts import GraphFacts
from .policy import PlanRequest, Policy
from .simulate import simulate

STEPS_PER_OCTAVE = 16

# What a rung's plan gives the walk: its simulated seconds and a way to make its Program.
Attempt = Callable[[PlanRequest], tuple[float, Callable[[], object]]]
# Who hears of each rung the walk has tried (the command line's heartbeat on a long walk):
# report(rungs tried, this rung's device bytes, its seconds or None where it did not plan,
# (best seconds, their device bytes) or None).
_RUNG_REPORT: ContextVar[Callable | None] = ContextVar("rung_report", default=None)


@contextmanager
def rungs_reported(report: Callable | None) -> Iterator[None]:
    """Within the block, every walk down the ladder calls ``report`` after each rung it tries
    (None: nobody)."""
    token = _RUNG_REPORT.set(report)
    try:
        yield
    finally:
        _RUNG_REPORT.reset(token)


def rung(k: int) -> int:
    """The k-th rung of the ladder, in device bytes."""
    return int(2.0 ** (k / STEPS_PER_OCTAVE))


def rungs_down_from(device_bytes: int, smallest: int, top: int) -> Iterator[int]:
    """The ladder's rungs at or below ``device_bytes``, highest first: ``top`` (the unlimited
    allocation's budget) where it is at or below, the powers 2**(k/STEPS_PER_OCTAVE) strictly
    between ``smallest`` and ``top``, and ``smallest`` itself last."""
    if device_bytes < smallest:
        return
    if top <= device_bytes:
        yield top
        device_bytes = top - 1
    k = int(STEPS_PER_OCTAVE * device_bytes.bit_length()) + 1
    while rung(k) > device_bytes:       # exact in integers, whatever the float log would round to
        k -= 1
    while rung(k) > smallest:
        yield rung(k)
        k -= 1
    yield smallest


def rung_planned(policy: Policy, request: PlanRequest) -> PlanRequest:
    """``request`` with its budget at the highest rung at or below it where ``on_ladder`` (as the
    walk's first plan), else as it is: a budget found this way to plan, given back, plans on the
    ladder too (``engine.library.planning.grow_budget``)."""
    if not on_ladder(policy, request):
        return request
    facts = request.facts
    highest = next(rungs_down_from(request.budget.device_bytes,
                                   smallest_budget(facts, [policy.placed_by(request.allocator)]), top_rung(facts)),
                   request.budget.device_bytes)
    return replace(request, budget=Budget(highest, request.budget.scratch_bytes))


def top_rung(facts: GraphFacts) -> int:
    """The device bytes that hold the unlimited allocation and the operator scratch."""
    return int(unlimited_allocation(facts).pool_bytes) + facts.scratch.bytes


def walked(request: PlanRequest) -> bool:
    """Whether ``request`` is planned on the ladder: a budget, a profile to time plans, and the
    graph's own order with no allocation given (not a search's candidate)."""
    return (request.budget is not None and request.profile is not None and request.schedule is None
            and request.allocation is None)


def fastest_rung(request: PlanRequest, policy: Policy, attempt: Attempt) -> tuple[float, Callable[[], object], int]:
    """(seconds, make, device bytes) of ``policy``'s fastest plan, timed by ``attempt``, at the
    rungs at or below the request's budget; the PlanError of the highest rung when none plans."""
    facts, profile = request.facts, request.profile
    allocator = policy.placed_by(request.allocator)
    best, refused, report = None, None, _RUNG_REPORT.get()
    for tried, device_bytes in enumerate(rungs_down_from(request.budget.device_bytes,
                                                         smallest_budget(facts, [allocator]), top_rung(facts)), 1):
        budget = Budget(device_bytes, request.budget.scratch_bytes)
        if best is not None and lower_bounds(facts, budget, profile, request.op_seconds).recompute_bound >= best[0]:
            break
        try:
            seconds, make = attempt(replace(request, budget=budget))
        except PlanError as e:
            refused = refused or e
            seconds = None
        else:
            if best is None or seconds < best[0]:
                best = (seconds, make, device_bytes)
        if report is not None:
            report(tried, device_bytes, seconds, (best[0], best[2]) if best else None)
    if best is None:
        raise refused or PlanError(f"policy '{policy.name}' found no plan at or below "
                                   f"{request.budget.device_bytes} device bytes")
    return best


def timed(policy: Policy) -> Attempt:
    """A rung's plan as the walk times it: the policy's own ``seconds`` where it has one (the
    Program made only for the rung chosen), else the Program made and simulated."""
    if policy.seconds is not None:
        return lambda request: (policy.seconds(request), lambda: policy.make(request))

    def attempt(request: PlanRequest):
        program = policy.make(request)
        return float(simulate(program, request.graph, request.profile, request.op_seconds).total), lambda: program
    return attempt


def on_ladder(policy: Policy, request: PlanRequest) -> bool:
    """Whether ``policy`` plans ``request`` on the ladder: it plans there (``Policy.budget_ladder``)
    and the request is ``walked``."""
    return policy.budget_ladder and walked(request)


def ladder_program(policy: Policy, request: PlanRequest):
    """``policy``'s Program for ``request``: the fastest rung's where ``on_ladder``, else as the
    policy makes it."""
    if not on_ladder(policy, request):
        return policy.make(request)
    return fastest_rung(request, policy, timed(policy))[1]()


def faster_of(policy: Policy, request: PlanRequest, make_searched: Callable[[], object], searched_seconds: float):
    """(Program, seconds of the ladder's plan or None): the searched Program (made by
    ``make_searched`` only when it is kept), or the unsearched plan on the ladder (``request``
    without the search's schedule and allocation) where that is faster, so that searching never
    gives a slower plan than not searching."""
    if not on_ladder(policy, request):
        return make_searched(), None
    seconds, make, _ = fastest_rung(request, policy, timed(policy))
    return (make(), seconds) if seconds < searched_seconds else (make_searched(), None)
