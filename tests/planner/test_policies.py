import pytest

from engine.profile import analytic_profile
from engine.program import SWAP_OUT
from planner.allocation import size_demand, smallest_budget
from planner.baselines import make_program
from planner.simulate import simulate
from planner.verify import verify


def test_every_policy_gives_a_verified_program(lstm_graph):
    g = lstm_graph
    budget = smallest_budget(size_demand(g, g.default_order()))
    prof = analytic_profile("v100")
    secs = prof.node_seconds(g)
    times = {}
    for policy in ("ideal", "odswap", "swapadvisor"):
        p = make_program(policy, g, budget, secs, prof.link.h2d_bytes_per_s)
        verify(p, g, None if policy == "ideal" else budget)
        times[policy] = simulate(p, g, prof, secs).total
    assert make_program("ideal", g, None).count(SWAP_OUT) == 0
    assert times["ideal"] <= min(times["odswap"], times["swapadvisor"])


def test_unknown_policy():
    with pytest.raises(ValueError, match="unknown policy 'magic'"):
        make_program("magic", None, 0)
