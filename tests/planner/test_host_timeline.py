"""The simulator's host timeline (planner.dispatch): off by default and then exactly the device's
timeline; on, one host issuing in program order, each instruction starting only once issued, so a
host slower than the device sets the iteration's time."""
import numpy as np
import pytest

from engine.profile import analytic_profile
from engine.program import COMPUTE, SWAP_IN, Instr
from planner.dispatch import HostCostError
from planner.simulate import simulate

from .test_simulate import PROFILE, toy

MS = 1e-3


def three_computes():
    """Three relus, one compute instruction each."""
    g, p = toy([])
    g.apply("relu", [g.tensors[0].id], name="r2")
    p.instrs = [Instr(COMPUTE, 0), Instr(COMPUTE, 1), Instr(COMPUTE, 2)]
    p.schedule = [0, 1, 2]
    return g, p


def test_a_host_slower_than_the_device_takes_the_hosts_time():
    g, p = three_computes()
    secs = np.full(3, 1 * MS)
    assert simulate(p, g, PROFILE, secs).total == pytest.approx(3 * MS)            # off: the device's 3 ms
    t = simulate(p, g, PROFILE, secs, host_seconds=np.full(3, 5 * MS))
    # issued at 5, 10, 15 ms; each then runs 1 ms on an idle device
    assert t.start.tolist() == pytest.approx([5 * MS, 10 * MS, 15 * MS])
    assert t.total == pytest.approx(16 * MS)
    # a fast host: only the first issue shows
    assert simulate(p, g, PROFILE, secs, host_seconds=np.full(3, 0.1 * MS)).total == pytest.approx(3.1 * MS)


def test_dispatch_s_moves_from_the_device_to_the_host():
    g, p = three_computes()
    secs = np.full(3, 1 * MS)
    prof = type(PROFILE)(PROFILE.device, PROFILE.link, dispatch_s=2 * MS)
    assert simulate(p, g, prof, secs).total == pytest.approx(9 * MS)                # off: on each instruction
    t = simulate(p, g, prof, secs, host_seconds=np.array([0.0, 0.0, 3 * MS]))
    assert t.start.tolist() == pytest.approx([2 * MS, 4 * MS, 9 * MS]) and t.total == pytest.approx(10 * MS)


def test_free_issues_give_exactly_the_device_timeline(tight_program, lstm_graph):
    prog, _ = tight_program
    assert prog.count(SWAP_IN) > 0
    profile = analytic_profile("v100")
    off = simulate(prog, lstm_graph, profile)
    on = simulate(prog, lstm_graph, profile, host_seconds=np.zeros(len(prog.instrs)))
    assert off.total == on.total and np.array_equal(off.start, on.start) and np.array_equal(off.finish, on.finish)
    slow = simulate(prog, lstm_graph, profile, host_seconds=np.full(len(prog.instrs), 1e-3))
    assert slow.total >= len(prog.instrs) * 1e-3 > off.total


@pytest.mark.parametrize("bad, says", [(np.zeros(2), "3 instructions need 3"), (np.array([0, -1.0, 0]), "instruction 1"),
                                       (np.array([0, 0, np.nan]), "instruction 2")])
def test_bad_host_costs_are_one_line(bad, says):
    g, p = three_computes()
    with pytest.raises(HostCostError, match=says):
        simulate(p, g, PROFILE, np.ones(3), host_seconds=bad)
