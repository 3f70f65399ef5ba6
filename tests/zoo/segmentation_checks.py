"""The check both of paper 001's image-to-image models share: a tiny configuration planned under a
budget that forces swapping trains bit-identically to the unlimited run on the cpu backend."""
from __future__ import annotations

from engine.program import SWAP_OUT
from engine.training import Trainer
from planner.facts import GraphFacts
from planner.policy import plan_with
from planner.verify import verify
from tests.planner.test_end_to_end import ITERATIONS, PROFILE, assert_trains_as_unlimited


def trains_bit_identically_while_swapping(g, policy: str = "swapadvisor") -> int:
    """Plans ``g`` at its smallest budget, checks the Program swaps, verifies and trains it as the
    unlimited run does; returns the number of swap-outs."""
    ref = Trainer(g, seed=0)
    losses = [ref.step() for _ in range(ITERATIONS)]
    budget = GraphFacts(g).smallest_budget
    program = plan_with(policy, g, budget, PROFILE)
    verify(program, g, budget)
    swaps = sum(1 for i in program.instrs if i.kind == SWAP_OUT and i.copy)
    assert swaps > 0, f"{g.name}: no swap at {budget} bytes"
    assert_trains_as_unlimited(g, program, 0, ref.state, losses, f"{g.name} {policy} at {budget} bytes")
    return swaps
