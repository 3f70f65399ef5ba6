"""``swapadvisor``: the SwapAdvisor planner (Belady eviction with a recency threshold) on a
schedule and allocation found by the genetic search, or, without a search, on the default
order with the simple allocation."""
from __future__ import annotations

from dataclasses import replace

from ..allocation import simple_allocation
from ..policy import Knob, PlanRequest, Policy, register
from ..simulate import simulated_seconds
from ..swap_planner import GraphArrays, PlanOptions, final_arrays, plan

# Evict ahead to keep a quarter of each class free, next values included, and order the copy
# streams by urgency (measured on the Table 1 models: bench/results/plan_quality_*.txt).
OPTIONS = PlanOptions(headroom=0.25, order_copies=True, kept_ahead=True)
# The headroom the search may choose instead (a gene): unsearched, the best differs by model and
# order (analytic V100, 16 GiB: NasNet-25 and RNN-8-8K 1.5-1.8% faster at 0 on the default
# order; Inception-4 3% faster at 0.5 with updates when ready; 0.25 elsewhere).
HEADROOM = Knob((0.0, 0.125, 0.25, 0.375, 0.5), OPTIONS.headroom)


def _options(request: PlanRequest) -> PlanOptions:
    h = request.policy_options.get("headroom", OPTIONS.headroom)
    return OPTIONS if h == OPTIONS.headroom else replace(OPTIONS, headroom=float(h))


def _order_and_allocation(request: PlanRequest):
    facts = request.facts
    order = facts.order if request.schedule is None else request.schedule
    alloc = request.allocation
    if alloc is None:
        alloc = simple_allocation(facts, request.budget, request.profile, request.node_seconds)
    return order, alloc


def make(request: PlanRequest):
    order, alloc = _order_and_allocation(request)
    return plan(request.graph, list(order), alloc, request.budget.scratch_bytes, request.profile,
                request.node_seconds, _options(request), policy=POLICY.name)


def seconds(request: PlanRequest) -> float:
    """The simulated time of ``make(request)``'s Program, planned and simulated on arrays."""
    order, alloc = _order_and_allocation(request)
    g, secs = request.graph, request.op_seconds
    arrays, _, _ = final_arrays(g, order, alloc, request.profile, secs, _options(request))
    return simulated_seconds(arrays, GraphArrays.of(g).tensor_bytes, secs, request.profile)


POLICY = register(Policy("swapadvisor", "SwapAdvisor: Belady swapping on a searched schedule and allocation",
                         make, searches=True, seconds=seconds, knobs={"headroom": HEADROOM}))
