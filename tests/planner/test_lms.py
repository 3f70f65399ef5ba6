"""Policy ``lms`` (TFLMS): only activations move, by the two thresholds; parameters stay on the
device; out of memory is one line; the autotune keeps the fastest setting on the simulator; and
training is bit-identical to the unlimited run on the cpu backend with the sanitizer."""
import numpy as np
import pytest

import zoo
from engine.backends.cpu import CpuBackend, EmulatedLink
from engine.executor import ProgramExecutor
from engine.ir import Kind
from engine.profile import analytic_profile
from engine.program import COMPUTE, SWAP_OUT
from engine.training import Trainer
from planner import policy
from planner.allocation import unlimited_allocation
from planner.budget import make_budget
from planner.facts import GraphFacts
from planner.online_program import StepFacts
from planner.policies.lms import LmsOutOfMemory, LmsSettings, plan_lms, tune
from planner.simulate import simulate
from planner.verify import verify

LINK = EmulatedLink(h2d_bytes_per_s=20e9, d2h_bytes_per_s=20e9, duplex_bytes_per_s=32e9, latency_s=0)
SETTINGS = LmsSettings(swapout_threshold=3, swapin_ahead=1)


def full_budget(g):
    facts = GraphFacts(g)
    return unlimited_allocation(facts).pool_bytes + facts.scratch.bytes


def budgets(g):
    """Five budgets LMS runs at with bestfit on the tiny RNNs (its resident parameters and
    bestfit's caching need more than the size-class pool's smallest): 0.8 to 1.2 of what the
    unlimited allocation uses."""
    return [int(f * full_budget(g)) for f in np.linspace(0.8, 1.2, 5)]


def request(g, device_bytes, profile=None, allocator="bestfit"):
    facts = GraphFacts(g)
    return policy.PlanRequest(g, facts, make_budget(facts, device_bytes), profile, allocator=allocator)


def copies_by_step(program):
    """(kind, tensor, step) per copy: the step a swap-out follows, or the step a swap-in precedes."""
    out, pos = [], -1
    for ins in program.instrs:
        if ins.kind == COMPUTE:
            pos += 1
        else:
            out.append((ins.kind, ins.target, pos if ins.kind == SWAP_OUT else pos + 1))
    return out


@pytest.mark.parametrize("family", ["rnn", "brnn"])
def test_only_activations_move_and_the_thresholds_hold(family):
    g = zoo.tiny(family)
    b = budgets(g)[0]
    program = plan_lms(request(g, b), SETTINGS)
    verify(program, g, b)
    steps = StepFacts(g, program.schedule)
    last = len(program.schedule) - 1
    state_next = {nxt for _, nxt in g.state_pairs}
    moved = 0
    for kind, t, step in copies_by_step(program):
        tensor = g.tensors[t]
        if tensor.kind != Kind.ACTIVATION:
            # parameters never swapped: only the first load of an input or a label, and next
            # values of state that stray from their home written back at the end
            if kind == SWAP_OUT:
                assert t in state_next and step == last, (tensor.name, step)
            else:
                assert tensor.kind in (Kind.INPUT, Kind.LABEL) or t not in program.initial_resident, tensor.name
                assert step == steps.uses[t][0], tensor.name
            continue
        moved += 1
        uses = steps.uses[t]
        if kind == SWAP_OUT:                # right after a use, the next one at least threshold away
            a = step
            nxt = next(u for u in uses if u > a)
            assert a in uses and nxt - a >= SETTINGS.swapout_threshold, (tensor.name, a, nxt)
        else:                               # swapin_ahead steps before its use, not before the swap-out
            b_use = next(u for u in uses if u >= step)
            prev = max(u for u in uses if u < step)
            assert step == max(prev + 1, b_use - SETTINGS.swapin_ahead), (tensor.name, step, b_use)
    assert moved > 0
    assert program.initial_resident     # parameters start on the device and stay there
    resident_names = {g.tensors[t].name for t in program.initial_resident}
    assert any(g.tensors[t].kind == Kind.PARAMETER for t in program.initial_resident), resident_names


def test_out_of_memory_is_one_line():
    g = zoo.tiny("rnn")
    b = int(0.5 * full_budget(g))
    with pytest.raises(LmsOutOfMemory) as e:
        plan_lms(request(g, b), SETTINGS)
    assert "\n" not in str(e.value) and "out of memory" in str(e.value) and "swapout_threshold=3" in str(e.value)


def test_autotune_keeps_the_fastest_setting_on_the_simulator():
    g = zoo.tiny("rnn")
    prof = analytic_profile("v100")
    req = request(g, budgets(g)[1], prof)
    grid = [LmsSettings(t, a) for t in (2, 4, 64) for a in (1, 2) if a < t]
    program, seconds, settings = tune(req, thresholds=(2, 4, 64), aheads=(1, 2))
    times = {s: simulate(plan_lms(req, s), g, prof).total for s in grid}
    assert seconds == pytest.approx(min(times.values())) and times[settings] == pytest.approx(seconds)
    fixed = policy.PlanRequest(g, req.facts, req.budget, prof, allocator="bestfit",
                               policy_options={"swapout_threshold": 4, "swapin_ahead": 2})
    assert policy.get("lms").make(fixed).instrs == plan_lms(req, LmsSettings(4, 2)).instrs


@pytest.mark.parametrize("family", ["rnn"])
def test_bit_identical_at_five_budgets(family):
    g = zoo.tiny(family)
    ref = Trainer(g, seed=0)
    ref_losses = [ref.step() for _ in range(2)]
    for i, b in enumerate(budgets(g)):
        program = plan_lms(request(g, b), SETTINGS)
        verify(program, g, b)
        assert program.count(SWAP_OUT) > 0
        assert_trains_like_unlimited(g, program, ref, ref_losses, i, f"{family} lms at {b} bytes")


def assert_trains_like_unlimited(g, program, ref, ref_losses, seed, what):
    """Two iterations of ``program`` on the cpu backend with the sanitizer and jitter: the losses
    and every state bit-identical to ``ref`` (a Trainer of the unlimited run that made ``ref_losses``)."""
    backend = CpuBackend(LINK, sanitize=True, seed=seed, jitter_s=2e-4)
    try:
        tr = Trainer(g, seed=0, runner=ProgramExecutor(program, g, backend))
        losses = [tr.step() for _ in range(2)]
        state = tr.state
    finally:
        backend.close()
    bad = [g.tensors[t].name for t, a in ref.state.items() if not np.array_equal(a, state[t])]
    assert not bad, f"{what}: {bad[:3]} differ"
    assert losses == ref_losses, f"{what}: losses {losses} != {ref_losses}"
