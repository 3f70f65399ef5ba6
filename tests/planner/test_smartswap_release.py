"""smartswap's release points from the copy queues (planner.smartswap.release_points): hand-computed
queue times, the pool and next-stay limits, and a link-bound update graph made faster by them."""
import zoo
from engine import iteration_stream as st
from engine.autodiff import make_optimizer
from engine.profile import analytic_profile
from planner.budget import make_budget
from planner.facts import GraphFacts
from planner.policy import PlanRequest
from planner.simulate import simulate
from planner.smartswap import SmartSwapPlan, Stay, Storage
from planner.smartswap.release_points import queued_extra, queued_releases
from planner.verify import verify

N = 8            # steps, one second each (Eq. 1); the link moves 100 B/s (Eq. 3)


def out_stay(nbytes, after, free_after=None, start=0, storage=None):
    st = storage or Storage(nbytes, nbytes, [start, after], {}, False)
    return Stay(st, nbytes, start, None, after, after if free_after is None else free_after, True, start)


def test_a_swap_out_queued_behind_another_is_released_where_it_finishes():
    # Both issued after step 0 (t = 1 s): X takes 3 s, done at 4 s, during step 3; Y waits for
    # X, done at 5 s, during step 4. The layer simulator had released both right after step 0.
    x, y = out_stay(300, 0), out_stay(100, 0)
    queued_releases([x, y], N, 1.0, 100.0, 100.0, limit=10**9)
    assert (x.free_after, y.free_after) == (3, 4)


def test_a_release_moves_only_as_far_as_the_pool_allows():
    # Held: 400 B at step 0. Moving X to step 3 holds 300 B over steps 1-3 (within 350 B); Y's
    # 100 B more would exceed it from step 1 on, so Y keeps its release point.
    x, y = out_stay(300, 0), out_stay(100, 0)
    queued_releases([x, y], N, 1.0, 100.0, 100.0, limit=350)
    assert (x.free_after, y.free_after) == (3, 0)
    assert queued_extra([out_stay(300, 0), out_stay(100, 0)], N, 1.0, 100.0, 100.0).tolist() == \
        [0, 400, 400, 400, 100, 0, 0, 0]


def test_a_release_stays_before_the_storages_next_stay():
    storage = Storage(1, 300, [0, 2], {}, False)
    first = out_stay(300, 0, storage=storage)
    again = Stay(storage, 300, 2, 1, None, 2, False, 2)          # swapped in again at step 2
    queued_releases([first, again], N, 1.0, 100.0, 100.0, limit=10**9)
    assert first.free_after == 1


def test_a_step_waiting_for_its_swap_in_lets_a_queued_copy_finish_in_fewer_steps():
    # X (400 B) leaves after step 0 and is done at 5 s. W (300 B) is swapped in at step 1's start
    # (t = 1 s) for step 2, which starts when it arrives (4 s): steps end at 1, 2, 5 s, so X
    # finishes during step 2, not step 4.
    x = out_stay(400, 0)
    w = Stay(Storage(2, 300, [2], {}, True), 300, 1, 2, None, 2, False, 2)
    queued_releases([x, w], N, 1.0, 100.0, 100.0, limit=10**9)
    assert x.free_after == 2


def test_on_a_link_bound_update_graph_make_keeps_the_faster_release_points_and_oldest_placement_wins():
    gs = st.IterationGraphs(lambda s: zoo.build("gpt-tiny", size=s, positions=16), make_optimizer("adamw"), 2)
    g = gs.update(gs.micro(16))
    facts = GraphFacts(g)
    budget = make_budget(facts, max(GraphFacts(gs.micro(16)).peak_bytes // 4 + facts.scratch.bytes,
                                    facts.smallest_budget))
    profile = analytic_profile("v100")
    seconds = {}
    for placement in ("bestfit", "oldest"):
        plan = SmartSwapPlan(PlanRequest(g, facts, budget, profile), placement=placement)
        made = plan.make()
        verify(made, g, budget.device_bytes)
        seconds[placement] = simulate(made, g, profile).total
        for queued in (True, False):            # make kept the faster of the two that fit
            other = plan.program(plan.stays_for(plan.stores, queued=queued))
            assert other is None or seconds[placement] <= simulate(other, g, profile).total
    # PyTorch's placement hands the next request the bytes a release point just gave back, so its
    # first write waits for that copy out; the block freed earliest rarely makes anything wait.
    assert seconds["oldest"] < 0.9 * seconds["bestfit"]
