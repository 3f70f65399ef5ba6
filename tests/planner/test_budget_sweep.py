"""One budget knob that behaves: a plan never gets slower when the budget grows.

PyTorch's memory-budget knob does not have this property (pytorch issue 197838: budget 0.05 gives
3.6-4.2x the peak memory of 0.15). For three models, ten budgets from the smallest that runs to
what the unlimited allocation uses: the planned (simulated) time of swapadvisor, capuchin and
checkpoint never rises as the budget grows (a budget a policy cannot plan counts as infinitely
slow, so it may only refuse the smaller budgets)."""
import math

import numpy as np
import pytest

import zoo
from planner.allocation import unlimited_allocation
from planner.errors import PlanError
from planner.facts import GraphFacts
from planner.policy import plan_with
from planner.simulate import simulate

from .test_end_to_end import PROFILE

MODELS = ["resnet", "rnn", "gpt"]
POLICIES = ["swapadvisor", "capuchin", "checkpoint"]
# Not reached yet (issue 36): the heuristic planners are not monotone by construction. Measured
# 2026-11-25 on these sweeps: resnet swapadvisor +0.7% at one step, capuchin +1.4%; rnn +0.1%.
# Strict: the day a change makes them monotone, these fail as XPASS and come off the list.
KNOWN_RISES = {("resnet", "swapadvisor"), ("resnet", "capuchin"), ("rnn", "swapadvisor"), ("rnn", "capuchin")}


@pytest.fixture(scope="module", params=MODELS)
def graph(request):
    return zoo.tiny(request.param)


def sweep(g, name: str) -> list[float]:
    facts = GraphFacts(g)
    full = unlimited_allocation(facts).pool_bytes + facts.scratch.bytes
    times = []
    for budget in np.geomspace(facts.smallest_budget, full, 10).astype(np.int64):
        try:
            program = plan_with(name, g, int(budget), PROFILE, facts=facts)
        except PlanError:
            times.append(math.inf)
            continue
        times.append(simulate(program, g, PROFILE).total)
    return times


@pytest.mark.parametrize("name", POLICIES)
def test_planned_time_never_rises_with_the_budget(graph, name, request):
    family = request.node.callspec.params["graph"]
    if (family, name) in KNOWN_RISES:
        request.applymarker(pytest.mark.xfail(strict=True, reason="not monotone by construction yet"))
    times = sweep(graph, name)
    assert math.isfinite(times[-1]), f"{graph.name} {name}: no plan at the unlimited allocation's budget"
    rises = [(i, a, b) for i, (a, b) in enumerate(zip(times, times[1:])) if b > a]
    assert not rises, f"{graph.name} {name}: slower with more memory at budgets {rises} (times {times})"
