"""Ranks sharing one host (issue 41): a profile's ``host`` bound divided among its ranks is the
link each rank's copies move on in the simulator; a host-aware planner sees that share."""
import json
from dataclasses import replace

import numpy as np
import pytest

from engine.library.models import model_graph
from engine.library.planning import plan
from engine.profile import HostShare, Link, Profile, ProfileError, analytic_profile
from engine.program import SWAP_IN
from planner.policy import get
from planner.simulate import simulate

V100 = analytic_profile("v100")          # 12 GB/s each way, 20 GB/s both ways, 10 us


@pytest.fixture(scope="module")
def swapping():
    g = model_graph("small-cnn", batch=4)
    program = plan(g, get("swapadvisor"), V100, 160 * 2**10).program
    assert program.count(SWAP_IN) > 0
    return g, program


def test_each_rank_copies_at_its_share_of_the_host(swapping):
    g, program = swapping
    shared = replace(V100, host=HostShare(ranks=4, bytes_per_s=24e9))      # 6 GB/s a rank
    assert shared.rank_link == Link(6e9, 6e9, 6e9, V100.link.latency_s)
    by_hand = replace(V100, link=Link(6e9, 6e9, 6e9, V100.link.latency_s))
    a, b = simulate(program, g, shared), simulate(program, g, by_hand)
    assert np.array_equal(a.finish, b.finish)
    assert a.total > simulate(program, g, V100).total                 # the copies slowed the iteration
    roomy = replace(V100, host=HostShare(ranks=2, bytes_per_s=100e9))    # 50 GB/s a rank: the device's link binds
    assert np.array_equal(simulate(program, g, roomy).finish, simulate(program, g, V100).finish)


def test_a_host_aware_planner_sees_the_share():
    shared = replace(V100, host=HostShare(ranks=8, bytes_per_s=32e9))
    seen = shared.shared()
    assert seen.host is None and seen.link.h2d_bytes_per_s == 4e9 and seen.link.duplex_bytes_per_s == 4e9


def test_the_profile_file_keeps_the_host_and_refuses_a_bad_one():
    shared = replace(V100, host=HostShare(ranks=4, bytes_per_s=24e9))
    d = json.loads(json.dumps(shared.to_dict()))
    assert Profile.from_dict(d).host == HostShare(4, 24e9)
    assert "host" not in V100.to_dict()
    with pytest.raises(ProfileError, match="'host.ranks' must be a whole number"):
        Profile.from_dict({**d, "host": {"ranks": 0, "bytes_per_s": 1e9}})
    with pytest.raises(ProfileError, match="host.bytes_per_s"):
        Profile.from_dict({**d, "host": {"ranks": 2, "bytes_per_s": 0}})


def test_the_ranks_keep_the_faster_plan_under_their_shared_host(tmp_path):
    from engine.library.ranks import RankSpec, plan_ranks, rank_graphs

    shared = replace(V100, host=HostShare(ranks=8, bytes_per_s=16e9))          # 2 GB/s a rank
    path = tmp_path / "host.json"
    shared.save(str(path))
    spec = RankSpec("small-cnn", batch=8, world=2, policy="swapadvisor", memory=160 * 2**10, profile=str(path))
    plans = plan_ranks(spec)
    differ = 0
    for g, program, seconds in zip(rank_graphs(spec), plans.programs, plans.seconds):
        candidates = [plan(g, get("swapadvisor"), seen, 160 * 2**10).program for seen in (shared, shared.shared())]
        times = [simulate(c, g, shared).total for c in candidates]
        differ += times[0] != times[1]
        assert seconds == pytest.approx(min(times)) and simulate(program, g, shared).total == pytest.approx(seconds)
    assert differ       # here the plan made on the share is the faster one (the micro graph's)


def test_ranks_behind_one_switch_divide_its_uplink_each_way():
    """DGX-1's two GPUs to a PCIe switch (bench.shared_host): a pair shares one uplink, full duplex,
    within the host's bound for all ranks together."""
    dgx = HostShare(ranks=8, bytes_per_s=120e9, group=2, group_bytes_per_s=12e9)
    assert dgx.share(V100.link) == Link(6e9, 6e9, 12e9, V100.link.latency_s)
    alone = HostShare(ranks=1, bytes_per_s=120e9, group=2, group_bytes_per_s=12e9)
    assert alone.share(V100.link) == V100.link                  # one rank has its switch to itself
    tight = HostShare(ranks=8, bytes_per_s=32e9, group=2, group_bytes_per_s=12e9)     # the host binds first
    assert tight.share(V100.link) == Link(4e9, 4e9, 4e9, V100.link.latency_s)
    d = json.loads(json.dumps(replace(V100, host=dgx).to_dict()))
    assert Profile.from_dict(d).host == dgx
    with pytest.raises(ProfileError, match="come together"):
        Profile.from_dict({**d, "host": {"ranks": 8, "bytes_per_s": 1e11, "group": 2}})
