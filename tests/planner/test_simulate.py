import json

import numpy as np
import pytest

from engine.ir import Graph
from engine.profile import Link, Profile
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT, Arena, Instr, Program
from planner.simulate import simulate

MB = 1_000_000


def toy(instrs):
    """Two 1 MB tensors and two relu nodes; the instructions are given."""
    g = Graph("toy")
    x = g.input("x", (MB // 4,))
    g.apply("relu", [x], name="r0")
    g.apply("relu", [x], name="r1")
    arena = Arena(np.zeros(0, np.int64), np.zeros(0, np.int64), 0)
    return g, Program("toy", [0, 1], arena, instrs, {})


PROFILE = Profile("toy", Link(h2d_bytes_per_s=1 * MB, d2h_bytes_per_s=1 * MB, duplex_bytes_per_s=1.5 * MB,
                              latency_s=0.0))
SECS = np.array([1.0, 2.0])


def test_compute_runs_in_order():
    g, p = toy([Instr(COMPUTE, 0), Instr(COMPUTE, 1)])
    t = simulate(p, g, PROFILE, SECS)
    assert t.total == pytest.approx(3.0) and t.start.tolist() == [0.0, 1.0]


def test_a_copy_overlaps_compute_unless_an_edge_orders_them():
    g, p = toy([Instr(SWAP_IN, 0, 0), Instr(COMPUTE, 0), Instr(COMPUTE, 1)])
    assert simulate(p, g, PROFILE, SECS).total == pytest.approx(3.0)
    g, p = toy([Instr(SWAP_IN, 0, 0), Instr(COMPUTE, 0, deps=[0]), Instr(COMPUTE, 1)])
    assert simulate(p, g, PROFILE, SECS).total == pytest.approx(4.0)


def test_both_directions_share_the_duplex_rate_while_they_overlap():
    g, p = toy([Instr(SWAP_IN, 0, 0), Instr(SWAP_OUT, 0, 0)])
    # each moves 1 MB at 0.75 MB/s while both run
    assert simulate(p, g, PROFILE, SECS).total == pytest.approx(1 / 0.75)


def test_partial_overlap_is_charged_exactly():
    # swap-out starts after compute r0 (1 s): swap-in moved 1 MB alone by then
    g, p = toy([Instr(COMPUTE, 0), Instr(SWAP_IN, 0, 0), Instr(SWAP_OUT, 0, 0, deps=[0])])
    g.tensors[0].nbytes = 2 * MB
    t = simulate(p, g, PROFILE, SECS)
    # at t=1: swap-in has 1 MB left, swap-out 2 MB; both at 0.75 MB/s -> swap-in done at 1+4/3,
    # then swap-out has 1 MB left alone at 1 MB/s
    assert t.finish[1] == pytest.approx(1 + 1 / 0.75)
    assert t.finish[2] == pytest.approx(1 + 1 / 0.75 + 1.0)


def test_latency_and_no_copy_swap_out():
    prof = Profile("toy", Link(MB, MB, 1.5 * MB, latency_s=0.5))
    g, p = toy([Instr(SWAP_IN, 0, 0), Instr(SWAP_OUT, 0, 0, copy=False)])
    t = simulate(p, g, prof, SECS)
    assert t.finish[0] == pytest.approx(1.5) and t.finish[1] == pytest.approx(0.0)


def test_chrome_trace_is_json(lstm_graph, tight_program):
    from engine.profile import analytic_profile
    p, _ = tight_program
    t = simulate(p, lstm_graph, analytic_profile("v100"))
    trace = json.loads(json.dumps(t.to_chrome_trace(p, lstm_graph)))
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == len(p.instrs) and {e["tid"] for e in xs} == {0, 1, 2}
    assert t.total == pytest.approx(max(e["ts"] + e["dur"] for e in xs) / 1e6)
