"""The stall report: every figure on a timeline worked out by hand, and its invariants on real plans."""
import dataclasses
import json

import numpy as np
import pytest

from engine.ir import Graph
from engine.profile import Link, analytic_profile
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT, Arena, Instr, Program
from planner.facts import GraphFacts
from planner.policy import plan_with
from planner.simulate import Timeline, simulate
from planner.stalls import stall_report

MB = 1_000_000


def hand_program():
    """x, w: 1 MB inputs; node 0: y = relu(x), node 1: z = relu(w). Objects 0..3 of 1 MB.

    time   0    1    2    3    4    5    6    7    8
    comp             [-y-]               [-z-]
    in     [--x--]        [x]  [w]  [-x-]                 (x into 0, then 0, w into 3, x into 1)
    out                   [-----y-----]     [---w---]     (y out of 1; x out of 0 moves nothing)
    """
    g = Graph("hand")
    x = g.input("x", (MB // 4,))
    w = g.input("w", (MB // 4,))
    (y,) = g.apply("relu", [x])
    g.apply("relu", [w])
    arena = Arena(np.arange(4, dtype=np.int64) * MB, np.full(4, MB, dtype=np.int64), 4 * MB)
    rows = [  # instruction, start, finish
        (Instr(SWAP_IN, x, 0), 0, 2),
        (Instr(COMPUTE, 0, objects=(0, 1), deps=[0]), 2, 3),        # waited 2 s for x
        (Instr(SWAP_OUT, x, 0, copy=False, deps=[1]), 3, 3),
        (Instr(SWAP_OUT, y, 1, deps=[1]), 3, 5),
        (Instr(SWAP_IN, x, 0, deps=[2]), 3, 3.5),                   # after a marker: not held
        (Instr(SWAP_IN, w, 3), 4, 4.5),
        (Instr(SWAP_IN, x, 1, deps=[3]), 5, 6),                     # held by y's write-back
        (Instr(COMPUTE, 1, objects=(3, 2), deps=[5, 6]), 6, 7),     # waited 3 s, released by 6
        (Instr(SWAP_OUT, w, 3, deps=[5]), 6.5, 8),
    ]
    program = Program("hand", [0, 1], arena, [r[0] for r in rows], {})
    timeline = Timeline(np.array([r[1] for r in rows], float), np.array([r[2] for r in rows], float), 8.0)
    return program, g, timeline


def test_every_figure_by_hand():
    s = stall_report(*hand_program())
    assert s.total_s == 8 and s.compute_busy_s == 2 and s.compute_idle_s == 6
    assert s.swap_in_busy_s == pytest.approx(2 + 0.5 + 0.5 + 1)
    assert s.swap_out_busy_s == pytest.approx(2 + 1.5)                 # the marker moves nothing
    assert s.copy_compute_overlap_s == pytest.approx(0.5)              # z's compute under w's swap-out
    assert s.both_directions_s == pytest.approx(0.5 + 0.5)
    assert (s.swap_ins, s.swap_ins_held_by_swap_out, s.held_fraction) == (4, 1, 0.25)
    assert s.compute_wait_on_swap_in_s == pytest.approx(2 + 3)
    assert json.loads(json.dumps(s.to_json()))["held_fraction"] == 0.25


@pytest.mark.parametrize("fraction", [0.2, 0.5])
def test_invariants_on_real_plans(lstm_graph, fraction):
    g = lstm_graph
    facts = GraphFacts(g)
    profile = dataclasses.replace(analytic_profile("v100"), link=Link(2e8, 2e8, 3.2e8, 1e-5))   # swaps stall
    device = max(facts.smallest_budget, int(fraction * facts.peak_bytes))
    for policy in ("odswap", "swapadvisor"):
        program = plan_with(policy, g, device, profile, facts=facts)
        t = simulate(program, g, profile)
        s = stall_report(program, g, t)
        assert s.compute_busy_s == pytest.approx(t.busy(program, COMPUTE))
        assert s.compute_idle_s == pytest.approx(t.total - s.compute_busy_s)
        assert 0 <= s.compute_wait_on_swap_in_s <= s.compute_idle_s + 1e-12
        assert 0 <= s.copy_compute_overlap_s <= min(s.compute_busy_s, s.swap_in_busy_s + s.swap_out_busy_s) + 1e-12
        assert 0 <= s.both_directions_s <= min(s.swap_in_busy_s, s.swap_out_busy_s) + 1e-12
        assert s.swap_ins == program.count(SWAP_IN) and 0 <= s.held_fraction <= 1
        assert s.compute_wait_on_swap_in_s > 0


def test_the_ideal_plan_barely_waits(lstm_graph):
    g = lstm_graph
    program = plan_with("ideal", g)
    s = stall_report(program, g, simulate(program, g, analytic_profile("v100")))
    assert s.swap_ins_held_by_swap_out == 0 and s.both_directions_s == 0
    assert s.compute_idle_s < 0.05 * s.total_s


def test_recomputations_are_counted_timed_and_weighed():
    """The hand-made CNN Program recomputes global_pool, stage0/relu and stem/conv/conv: the
    report counts three, times them at their nodes' seconds (inside the compute stream's busy
    time: exactly what the recomputations add to the unlimited Program's), and weighs the
    outputs they recreate. A Program without recomputations reports none."""
    from planner.policy import unlimited_program
    from tests.planner.recompute_programs import cnn, recomputing_cnn

    g = cnn()
    profile = analytic_profile("v100")
    unlimited = unlimited_program(g)
    program = recomputing_cnn(g, unlimited)
    s = stall_report(program, g, simulate(program, g, profile))
    before = stall_report(unlimited, g, simulate(unlimited, g, profile))
    recomputed = [g.nodes[i.target] for i in program.instrs if i.recompute]
    assert s.recomputes == 3 == len(recomputed)
    assert s.recompute_s > 0
    assert s.recompute_s == pytest.approx(sum(profile.node_seconds(g)[n.id] for n in recomputed))
    assert s.compute_busy_s - before.compute_busy_s == pytest.approx(s.recompute_s)
    assert s.recomputed_bytes == sum(g.tensors[t].nbytes for n in recomputed for t in n.outputs) > 0
    assert (before.recomputes, before.recompute_s, before.recomputed_bytes) == (0, 0.0, 0)
    j = json.loads(json.dumps(s.to_json()))
    assert (j["recomputes"], j["recomputed_bytes"]) == (3, s.recomputed_bytes) and j["recompute_s"] == s.recompute_s
