"""The simulator charges a stream's wake-up (``Profile.wake_s``) when it sat idle waiting for
another stream, and only then; the CPU profile measures it."""
import json
from dataclasses import replace

import numpy as np
import pytest

from engine.profile import Profile, ProfileError, analytic_profile
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT, Instr
from planner.simulate import simulate

from .test_simulate import PROFILE, SECS, toy

WAKE = replace(PROFILE, wake_s=0.25)


def test_a_compute_that_waited_for_a_copy_starts_a_wake_up_after_it():
    # the swap-in takes 1 s (1 MB at 1 MB/s); compute 0 waits for it from time 0
    g, p = toy([Instr(SWAP_IN, 0, 0), Instr(COMPUTE, 0, deps=[0]), Instr(COMPUTE, 1)])
    assert simulate(p, g, PROFILE, SECS).total == pytest.approx(4.0)
    t = simulate(p, g, WAKE, SECS)
    assert t.start[1] == pytest.approx(1.0) and t.finish[1] == pytest.approx(2.25) and t.total == pytest.approx(4.25)


def test_no_wake_up_where_the_stream_was_busy_when_the_copy_finished():
    # compute 1 (2 s) runs first; the swap-in ends at 1 s, so compute 0 never blocks on it
    g, p = toy([Instr(SWAP_IN, 0, 0), Instr(COMPUTE, 1), Instr(COMPUTE, 0, deps=[0])])
    assert simulate(p, g, WAKE, SECS).total == simulate(p, g, PROFILE, SECS).total == pytest.approx(3.0)


def test_a_copy_stream_waiting_for_compute_wakes_up_too_and_same_stream_order_is_free():
    g, p = toy([Instr(COMPUTE, 0), Instr(SWAP_OUT, 0, 0, deps=[0])])
    t = simulate(p, g, WAKE, SECS)
    assert t.start[1] == pytest.approx(1.0) and t.total == pytest.approx(1.0 + 0.25 + 1.0)
    g, p = toy([Instr(COMPUTE, 0), Instr(COMPUTE, 1, deps=[0])])      # in order on one stream: no wake-up
    assert simulate(p, g, WAKE, SECS).total == pytest.approx(3.0)


def test_zero_wake_is_every_plan_s_time_as_before(tight_program, lstm_graph):
    prog, _ = tight_program
    profile = analytic_profile("v100")
    assert profile.wake_s == 0
    base = simulate(prog, lstm_graph, profile)
    woken = simulate(prog, lstm_graph, replace(profile, wake_s=1e-4))
    assert woken.total > base.total
    # each wake-up costs at most wake_s once per instruction
    assert woken.total <= base.total + 1e-4 * len(prog.instrs)


def test_the_profile_keeps_its_wake_up_and_refuses_a_bad_one():
    d = WAKE.to_dict()
    assert Profile.from_dict(json.loads(json.dumps(d))).wake_s == 0.25
    assert "wake_s" not in PROFILE.to_dict()                 # old files stay as they were
    for bad, says in ((-1.0, "wake_s"), (2.0, "wake_s"), ("x", "wake_s")):
        with pytest.raises(ProfileError, match=says):
            Profile.from_dict({**d, "wake_s": bad})


def test_the_cpu_profile_measures_a_wake_up():
    from engine.cpu_profiling import measure_wake_s
    w = measure_wake_s(trials=20)
    assert 0 < w < 1               # an OS wake-up (microseconds idle, more on a busy host), within what a profile accepts
