"""recordStream's event queries (planner/smartswap/record_stream.py), counted from reuse intervals:
by hand on a few stays, and on a small SmartSwap plan against release_report's intervals."""
import numpy as np
import pytest

import zoo
from engine.profile import analytic_profile
from engine.program import COMPUTE
from planner.budget import make_budget
from planner.facts import GraphFacts
from planner.policy import PlanRequest
from planner.simulate import simulate
from planner.smartswap import SmartSwapPlan, Stay, release_report
from planner.smartswap.record_stream import FIFO, PER_BLOCK, host_seconds, pending_blocks, queries_per_step


def stay(out_after, free_after, copy_out=True):
    return Stay(None, 1, 0, None, out_after, free_after, copy_out)


N = 8
STAYS = [stay(1, 4), stay(2, 3),
         stay(5, 5),                 # released where it was swapped out: no dispatch waits on it
         stay(0, 6, copy_out=False),  # its host copy was current: nothing to wait for
         stay(6, N + 3),             # released past the last step: at the synchronization (step 7)
         stay(0, 7)]


def test_pending_and_queries_by_hand():
    assert pending_blocks(STAYS, N).tolist() == [0, 1, 2, 3, 2, 1, 1, 2]
    assert queries_per_step(STAYS, N, PER_BLOCK).tolist() == [0, 1, 2, 3, 2, 1, 1, 2]
    # FIFO: the blocks released at a step (found complete) plus one while any stays pending
    assert queries_per_step(STAYS, N, FIFO).tolist() == [0, 1, 1, 2, 2, 1, 1, 2]
    with pytest.raises(ValueError, match="polling must be one of"):
        queries_per_step(STAYS, N, "every")


@pytest.fixture(scope="module")
def small_plan():
    g = zoo.build("gpt-tiny", size=16, positions=16)
    facts = GraphFacts(g)
    profile = analytic_profile("v100")
    plan = SmartSwapPlan(PlanRequest(g, facts, make_budget(facts, facts.peak_bytes // 2), profile))
    return g, plan, plan.make(), profile


def test_queries_are_the_reuse_intervals_of_a_plan(small_plan):
    g, plan, prog, profile = small_plan
    n = len(plan.order)
    rep = release_report(plan)
    assert len(rep.at_sync) > 0
    at_sync = plan.stays_for(plan.stores, release_at_sync=True)
    ours = plan.stays_for(plan.stores, queued=plan.queued)
    # every dispatch inside a block's interval queries it: the queries add up to the intervals
    assert queries_per_step(at_sync, n, PER_BLOCK).sum() == rep.at_sync.sum()
    assert queries_per_step(ours, n, PER_BLOCK).sum() == rep.simulator.sum()
    fifo = queries_per_step(at_sync, n, FIFO)
    assert fifo.max() <= len(rep.at_sync) and fifo.sum() < rep.at_sync.sum()
    # placed on the Program's scheduled computes, in order
    q = queries_per_step(at_sync, n, PER_BLOCK)
    h = host_seconds(prog, q, 1e-6)
    computes = [i for i, ins in enumerate(prog.instrs) if ins.kind == COMPUTE and not ins.recompute]
    assert [prog.instrs[i].target for i in computes] == plan.order
    assert h[computes].tolist() == pytest.approx((q * 1e-6).tolist()) and h.sum() == pytest.approx(q.sum() * 1e-6)
    with pytest.raises(ValueError, match="steps of queries"):
        host_seconds(prog, q[:-1], 1e-6)
    # polling slows the iteration only once the host falls behind the device
    device = simulate(prog, g, profile).total
    assert simulate(prog, g, profile, host_seconds=h * 1e-3).total == pytest.approx(device, rel=1e-6)
    slow = simulate(prog, g, profile, host_seconds=h * 1e3).total
    assert slow >= q.sum() * 1e-3 > device
