import copy

import numpy as np
import pytest

from engine.backends.cpu import CpuBackend, EmulatedLink
from engine.executor import ProgramExecutor
from engine.program import COMPUTE, SWAP_IN
from engine.training import Trainer
from planner.allocation import simple_allocation
from planner.budget import make_budget
from planner.facts import GraphFacts
from planner.swap_planner import plan
from planner.verify import verify
from zoo import small

FAST_LINK = EmulatedLink(h2d_bytes_per_s=50e9, d2h_bytes_per_s=50e9, duplex_bytes_per_s=80e9, latency_s=0)


@pytest.fixture(scope="module")
def setup():
    g = small.lstm(batch=4, steps=4, features=8, hidden=8, layers=2, classes=3)
    ref = Trainer(g, seed=3)
    for _ in range(3):
        ref.step()
    facts = GraphFacts(g)
    budget = make_budget(facts, facts.smallest_budget)
    program = plan(g, facts.order, simple_allocation(facts, budget), budget.scratch_bytes)
    return g, ref.state, program, budget.device_bytes


def run(g, program, backend, iterations=3):
    tr = Trainer(g, seed=3, runner=ProgramExecutor(program, g, backend))
    try:
        losses = [tr.step() for _ in range(iterations)]
        return tr.state, losses
    finally:
        backend.close()


def test_sanitized_run_under_the_smallest_budget_is_bit_identical(setup):
    g, ref_state, program, budget = setup
    verify(program, g, budget)
    state, _ = run(g, program, CpuBackend(FAST_LINK, sanitize=True, seed=1))
    for t, a in ref_state.items():
        assert np.array_equal(a, state[t]), g.tensors[t].name


def test_host_state_trades_buffers_between_captured_iterations(setup):
    """Parameters and optimizer state that live on the host are not copied between iterations:
    the current and next value's buffers trade places, with one captured iteration per
    arrangement. Four captured iterations (both arrangements twice) stay bit-identical."""
    g, _, program, _ = setup
    ref = Trainer(g, seed=3)
    ref_losses = [ref.step() for _ in range(4)]
    backend = CpuBackend(FAST_LINK)
    ex = ProgramExecutor(program, g, backend)
    try:
        assert ex.traded and ex.graphs is not None and ex.graphs[0] is not ex.graphs[1]
        cur, nxt = ex.traded[0]
        before = ex.host[cur], ex.host[nxt]
        tr = Trainer(g, seed=3, runner=ex)
        losses = [tr.step()]
        assert ex.host[nxt] is before[0] and ex.host[cur] is before[1]       # traded, not copied
        losses += [tr.step() for _ in range(3)]
        state = tr.state
    finally:
        backend.close()
    assert losses == ref_losses
    for t, a in ref.state.items():
        assert np.array_equal(a, state[t]), g.tensors[t].name


def late_swap_ins(seed):
    """Sanitizer with swap-ins delayed up to 5 ms each: a compute that does not wait reads poison."""
    return CpuBackend(FAST_LINK, sanitize=True, seed=seed, jitter_s=(0.0, 5e-3, 0.0))


def test_sanitizer_turns_a_missing_edge_into_a_wrong_answer(setup):
    g, ref_state, program, _ = setup
    control, _ = run(g, program, late_swap_ins(2))
    assert all(np.array_equal(a, control[t]) for t, a in ref_state.items())
    broken = copy.deepcopy(program)
    for ins in broken.instrs:
        if ins.kind == COMPUTE:
            ins.deps = [d for d in ins.deps if broken.instrs[d].kind != SWAP_IN]
    try:
        state, losses = run(g, broken, late_swap_ins(2))
    except ValueError as e:     # a poisoned label (-1) caught by the loss kernel is a detection too
        assert "outside" in str(e)
        return
    differs = [t for t, a in ref_state.items() if not np.array_equal(a, state[t])]
    assert differs


def test_backend_arena_is_exactly_the_programs_arena(setup):
    g, _, program, budget = setup
    backend = CpuBackend(FAST_LINK)
    try:
        ProgramExecutor(program, g, backend)
        assert backend.arena.nbytes == program.arena.arena_bytes <= budget
        assert backend.arena.ctypes.data % 256 == 0
    finally:
        backend.close()
