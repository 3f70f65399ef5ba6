"""The promise: under any budget from the smallest that runs up to unlimited, with the sanitizer
poisoning freed memory and jittering every stream, training gives parameters bit-identical to
the unlimited-memory run, for the SwapAdvisor planner and for on-demand swapping."""
import numpy as np
import pytest

import zoo
from engine.backends.cpu import CpuBackend, EmulatedLink
from engine.executor import ProgramExecutor
from engine.liveness import peak_bytes
from engine.profile import Link, Profile, Rates
from engine.training import Trainer
from planner.allocation import unlimited_allocation
from planner.facts import GraphFacts
from planner.policy import plan_with
from planner.verify import verify

LINK = EmulatedLink(h2d_bytes_per_s=20e9, d2h_bytes_per_s=20e9, duplex_bytes_per_s=32e9, latency_s=0)
ITERATIONS = 3
# Plans made with op times and a link (the recency threshold, evicting ahead and the copy
# streams' order by urgency all use them), the link slow enough that copies matter.
PROFILE = Profile("e2e", Link(h2d_bytes_per_s=2e9, d2h_bytes_per_s=2e9, duplex_bytes_per_s=3e9, latency_s=1e-6),
                  Rates(flops_per_s=1e11, bytes_per_s=5e10))
FAMILIES = ["wresnet", "inception", "nasnet", "rnn", "brnn"]


def budgets(g):
    """Five budgets from the smallest that runs to what the unlimited allocation uses."""
    facts = GraphFacts(g)
    smallest = facts.smallest_budget
    full = unlimited_allocation(facts).pool_bytes + facts.scratch.bytes
    return [int(b) for b in np.geomspace(smallest, full, 5)]


@pytest.fixture(scope="module", params=FAMILIES)
def model(request):
    g = zoo.tiny(request.param)
    ref = Trainer(g, seed=0)
    losses = [ref.step() for _ in range(ITERATIONS)]
    return request.param, g, ref.state, losses


def test_smallest_budget_is_below_a_quarter_of_the_peak(model):
    name, g, _, _ = model
    assert budgets(g)[0] < peak_bytes(g) / 4, name


@pytest.mark.parametrize("policy,profile", [("swapadvisor", PROFILE), ("swapadvisor", None), ("odswap", None)])
def test_bit_identical_at_every_budget(model, policy, profile):
    name, g, ref_state, ref_losses = model
    for i, budget in enumerate(budgets(g)):
        program = plan_with(policy, g, budget, profile)
        verify(program, g, budget)
        assert_trains_as_unlimited(g, program, i, ref_state, ref_losses, f"{name} {policy} at {budget} bytes")


def assert_trains_as_unlimited(g, program, seed, ref_state, ref_losses, what):
    """ITERATIONS steps of ``program`` on the sanitizing, jittering CPU backend give the
    unlimited run's parameters and losses, bit for bit."""
    backend = CpuBackend(LINK, sanitize=True, seed=seed, jitter_s=2e-4)
    try:
        tr = Trainer(g, seed=0, runner=ProgramExecutor(program, g, backend))
        losses = [tr.step() for _ in range(ITERATIONS)]
        state = tr.state
    finally:
        backend.close()
    bad = [g.tensors[t].name for t, a in ref_state.items() if not np.array_equal(a, state[t])]
    assert not bad, f"{what}: {bad[:3]} differ"
    assert losses == ref_losses, f"{what}: losses {losses} != {ref_losses}"
