"""The promise: under any budget from the smallest that runs up to unlimited, with the sanitizer
poisoning freed memory and jittering every stream, training gives parameters bit-identical to
the unlimited-memory run, for the SwapAdvisor planner (which also recomputes), Capuchin's choice,
checkpointing and on-demand swapping, on the paper's five families and a GPT decoder."""
import numpy as np
import pytest

import zoo
from engine.backends.cpu import CpuBackend, EmulatedLink
from engine.executor import ProgramExecutor
from engine.liveness import peak_bytes
from engine.profile import Link, Profile, Rates
from engine.program import SWAP_OUT
from engine.training import Trainer
from planner.allocation import unlimited_allocation
from planner.facts import GraphFacts
from planner.budget import make_budget, smallest_that_plans
from planner.policy import PlanRequest, get, plan_with
from planner.errors import PlanError
from planner.verify import verify

LINK = EmulatedLink(h2d_bytes_per_s=20e9, d2h_bytes_per_s=20e9, duplex_bytes_per_s=32e9, latency_s=0)
ITERATIONS = 3
# Plans made with op times and a link (the recency threshold, evicting ahead and the copy
# streams' order by urgency all use them), the link slow enough that copies matter.
PROFILE = Profile("e2e", Link(h2d_bytes_per_s=2e9, d2h_bytes_per_s=2e9, duplex_bytes_per_s=3e9, latency_s=1e-6),
                  Rates(flops_per_s=1e11, bytes_per_s=5e10))
FAMILIES = ["wresnet", "inception", "nasnet", "rnn", "brnn", "gpt"]


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


# With PROFILE's slow link swapadvisor and capuchin also recompute (keep, swap or recompute).
@pytest.mark.parametrize("policy,profile", [("swapadvisor", PROFILE), ("swapadvisor", None), ("odswap", None),
                                            ("capuchin", PROFILE)])
def test_bit_identical_at_every_budget(model, policy, profile):
    name, g, ref_state, ref_losses = model
    recomputes = 0
    for i, budget in enumerate(budgets(g)):
        program = plan_with(policy, g, budget, profile)
        verify(program, g, budget)
        recomputes += program.recomputes
        assert_trains_as_unlimited(g, program, i, ref_state, ref_losses, f"{name} {policy} at {budget} bytes")
    RECOMPUTED[(name, policy, profile is not None)] = recomputes


RECOMPUTED: dict = {}


def test_plans_with_a_slow_link_recompute(model):
    """The runs above trained plans that recompute (not only swap-only ones): capuchin's on the
    CNNs (the tiny RNNs' and GPT's tensors that leave have no chain that fits beside their
    readers, or come from nodes of several outputs).
    swapadvisor keeps the faster of its plan with and without recomputation, so whether it
    recomputes is its choice."""
    name = model[0]
    if name not in ("wresnet", "inception", "nasnet"):
        pytest.skip("no recomputation expected")
    if (name, "capuchin", True) in RECOMPUTED:
        assert RECOMPUTED[(name, "capuchin", True)] > 0, f"{name} capuchin: no recomputation at any budget"


def checkpoint_budgets(g, facts):
    """Five budgets from the least at which checkpoint plans to what the unlimited allocation
    uses (it keeps on the device what it cannot recompute, so it need not plan at the smallest
    budget that runs every operator)."""
    policy = get("checkpoint")
    placed = [policy.placed_by(None)]
    least, _ = smallest_that_plans(facts, facts.smallest_budget, placed,
                                   lambda b: policy.make(PlanRequest(g, facts, b, PROFILE)))
    full = unlimited_allocation(facts).pool_bytes + facts.scratch.bytes
    return [int(b) for b in np.geomspace(least.device_bytes, max(full, least.device_bytes), 5)]


# Where checkpoint plans below what the unlimited allocation uses, and so recomputes: the tiny
# WResNet, BRNN and GPT hold mostly state and gradients, which it cannot drop.
RECOMPUTING_CHECKPOINT = {"inception", "nasnet", "rnn"}


def test_checkpoint_recomputes_only_and_trains_bit_identically(model):
    """Recompute only: no activation is copied out; at five budgets from the least at which it
    plans, bit-identical training; below that it refuses with OutOfRoom (a PlanError)."""
    name, g, ref_state, ref_losses = model
    facts = GraphFacts(g)
    recomputes = []
    for i, budget in enumerate(checkpoint_budgets(g, facts)):
        program = plan_with("checkpoint", g, budget, PROFILE)
        verify(program, g, budget)
        copied_out = {i.target for i in program.instrs if i.kind == SWAP_OUT and i.copy}
        assert copied_out <= {nxt for _, nxt in g.state_pairs}, f"{name}: checkpoint copied activations out"
        assert_trains_as_unlimited(g, program, i, ref_state, ref_losses, f"{name} checkpoint at {budget} bytes")
        recomputes.append(program.recomputes)
        if name == "rnn" and i == 0:       # the LSTM's gates come from a split: recomputed whole
            assert any(ins.recompute and len(g.nodes[ins.target].outputs) > 1 for ins in program.instrs)
    if name in RECOMPUTING_CHECKPOINT:
        assert recomputes[0] > 0, f"{name}: checkpoint recomputed nothing at its least budget ({recomputes})"
    with pytest.raises(PlanError):
        plan_with("checkpoint", g, facts.smallest_budget, PROFILE)


def test_checkpoint_on_chunks_recomputes_and_trains_bit_identically(model):
    """checkpoint on va's chunks (4 KiB here, so the tiny CNNs' activations span several):
    a virtual arena, recomputations, no activation copied out, bit-identical training."""
    name, g, ref_state, ref_losses = model
    if name not in ("inception", "nasnet"):
        pytest.skip("the CNNs' tensors span chunks")
    facts = GraphFacts(g)
    budget = checkpoint_budgets(g, facts)[0]
    request = PlanRequest(g, facts, make_budget(facts, budget, ["va"]), PROFILE, allocator="va",
                          allocator_options={"chunk_bytes": 4096})
    program = get("checkpoint").make(request)
    verify(program, g, budget)
    assert program.arena.virtual and program.recomputes > 0
    copied_out = {i.target for i in program.instrs if i.kind == SWAP_OUT and i.copy}
    assert copied_out <= {nxt for _, nxt in g.state_pairs}, f"{name}: checkpoint copied activations out"
    assert_trains_as_unlimited(g, program, 0, ref_state, ref_losses, f"{name} checkpoint on chunks at {budget} bytes")


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
