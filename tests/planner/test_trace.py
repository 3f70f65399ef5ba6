"""The Chrome trace: valid JSON with a slice per instruction, a counter of device bytes in use
and a flow arrow per dependency that crosses streams."""
import json

import numpy as np
import pytest

from engine.profile import analytic_profile
from planner.facts import GraphFacts
from planner.policy import plan_with
from planner.simulate import simulate
from planner.trace import MEMORY_COUNTER
from tests.planner.test_stalls import MB, hand_program


def events(trace, ph):
    return [e for e in trace["traceEvents"] if e["ph"] == ph]


def cross_stream_edges(program):
    return sum(program.instrs[d].kind != ins.kind for ins in program.instrs for d in ins.deps)


def test_memory_counter_by_hand():
    program, g, timeline = hand_program()
    program.arena.scratch_bytes = 256
    trace = json.loads(json.dumps(timeline.to_chrome_trace(program, g)))
    levels = {e["ts"] / 1e6: e["args"] for e in events(trace, "C")}
    assert all(e["name"] == MEMORY_COUNTER for e in events(trace, "C"))
    tensors = {t: a["tensors"] // MB for t, a in levels.items()}
    # Stays: object 0 holds x [0, 3] (to its no-copy swap-out) and x again [3, 3.5]; object 1
    # y [2, 5] (to its swap-out) and x [5, 6] (nothing uses it after its swap-in); object 3
    # w [4, 8]; object 2 z [6, 7].
    assert [tensors[t] for t in (0, 2, 3, 3.5, 4, 5, 6, 7)] == [1, 2, 2, 1, 2, 2, 2, 1]
    assert tensors[8] == 0 and min(tensors.values()) >= 0
    assert {a["scratch"] for a in levels.values()} == {256}
    assert all(a["object slack"] == 0 for a in levels.values())


def test_flows_pair_up_across_streams():
    program, g, timeline = hand_program()
    trace = timeline.to_chrome_trace(program, g)
    starts, finishes = events(trace, "s"), events(trace, "f")
    assert len(starts) == len(finishes) == cross_stream_edges(program)
    assert sorted(e["id"] for e in starts) == sorted(e["id"] for e in finishes)
    assert all(e["bp"] == "e" for e in finishes)


@pytest.mark.parametrize("policy", ["ideal", "swapadvisor"])
def test_trace_of_a_real_plan(lstm_graph, policy):
    g = lstm_graph
    facts = GraphFacts(g)
    device = None if policy == "ideal" else max(facts.smallest_budget, facts.peak_bytes // 3)
    profile = analytic_profile("v100")
    program = plan_with(policy, g, device, profile, facts=facts)
    t = simulate(program, g, profile)
    trace = json.loads(json.dumps(t.to_chrome_trace(program, g)))
    assert len(events(trace, "X")) == len(program.instrs)
    assert len(events(trace, "s")) == cross_stream_edges(program)
    counter = events(trace, "C")
    in_use = np.array([e["args"]["tensors"] + e["args"]["object slack"] for e in counter])
    assert in_use.min() >= 0 and in_use.max() <= program.arena.arena_bytes - program.arena.scratch_bytes
    assert in_use.max() > 0
    if policy == "ideal":      # nothing leaves the device: the counter peaks at the liveness peak
        tensors = max(e["args"]["tensors"] for e in counter)
        assert tensors == pytest.approx(facts.peak_bytes, rel=0.01)


def test_recomputations_stand_apart_in_the_trace():
    """A recomputation's slice is named "recompute <node>" in category "recompute", on the
    compute row; the node's own step keeps its plain name; nothing else is in that category."""
    from engine.program import COMPUTE
    from planner.trace import RECOMPUTE
    from tests.planner.recompute_programs import cnn, recomputing_cnn

    g = cnn()
    program = recomputing_cnn(g, plan_with("ideal", g))
    trace = json.loads(json.dumps(simulate(program, g, analytic_profile("v100")).to_chrome_trace(program, g)))
    slices = events(trace, "X")
    assert len(slices) == len(program.instrs)
    marked = [e for e in slices if e.get("cat") == RECOMPUTE]
    assert sorted(e["name"] for e in marked) == ["recompute global_pool", "recompute stage0/relu",
                                                 "recompute stem/conv/conv"]
    assert all(e["tid"] == COMPUTE and program.instrs[e["args"]["instruction"]].recompute for e in marked)
    steps = [e for e in slices if e["name"] in ("global_pool", "stage0/relu", "stem/conv/conv")]
    assert len(steps) == 3 and not any("cat" in e for e in steps)
