import math
import os
import time

import numpy as np
import pytest

from allocator import Allocation
from ga.fitness import DeadlineReached, Evaluator, WorkerPool, default_workers
from planner.allocation import simple_allocation
from planner.simulate import simulate
from planner.swap_planner import plan

from .helpers import PROFILE, lstm, tight_budget


def test_time_is_plan_plus_simulate():
    g = lstm()
    budget = tight_budget(g) * 2
    alloc = simple_allocation(g, g.default_order(), budget)
    ev = Evaluator(g, PROFILE, budget)
    secs = PROFILE.node_seconds(g)
    expected = simulate(plan(g, g.default_order(), alloc, secs, PROFILE.link.h2d_bytes_per_s),
                        g, PROFILE, secs).total
    assert ev.time(np.arange(len(g.nodes), dtype=np.int32), alloc) == expected
    assert ev.program(g.default_order(), alloc).pool.arena_bytes <= budget


def test_infeasible_allocations_cost_infinity_not_an_error():
    g = lstm()
    budget = tight_budget(g)
    ev = Evaluator(g, PROFILE, budget)
    sizes = np.unique([t.nbytes for t in g.tensors])
    too_few = Allocation(sizes, np.zeros(sizes.size, dtype=int), [1])      # PlanError in the planner
    assert too_few.pool_bytes <= budget and ev.time(g.default_order(), too_few) == math.inf
    too_big = Allocation(sizes, np.arange(sizes.size), np.full(sizes.size, 100))
    assert too_big.pool_bytes > budget and ev.time(g.default_order(), too_big) == math.inf


def _square(state, x):
    return state * x * x


def _pid(state, x):
    return os.getpid()


def _slow(state, x):
    time.sleep(0.2 if x else 0)
    return x


def test_worker_pool_keeps_item_order_and_builds_state_once_per_worker():
    items = list(range(12))
    with WorkerPool(int, ("3",), workers=2) as pool:
        assert pool.map(_square, items) == [3 * x * x for x in items]
        pids = set(pool.map(_pid, items))
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    with WorkerPool(int, ("3",), workers=1) as pool:
        assert pool.map(_square, items) == [3 * x * x for x in items]
        assert pool.state == 3


def test_worker_pool_spawn_start_method():
    with WorkerPool(int, ("2",), workers=2, start_method="spawn") as pool:
        assert pool.map(_square, [1, 2, 3]) == [2, 8, 18]


@pytest.mark.parametrize("workers", [1, 2])
def test_deadline_returns_what_finished(workers):
    pool = WorkerPool(int, ("0",), workers=workers)
    try:
        with pytest.raises(DeadlineReached) as info:
            pool.map(_slow, [0, 1, 1, 1, 1, 1, 1, 1], deadline=time.monotonic() + 0.3)
        got = info.value.results
        assert got[:1] == [0] and len(got) < 8
    finally:
        pool.terminate()


def test_default_workers_is_positive():
    assert default_workers() >= 1
