import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocator import Allocation
from ga import allocation_ops as ao
from ga.context import GraphContext

from .helpers import lstm, lstm_context, tight_budget

MB = 2**20
FIG5 = GraphContext.synthetic(sizes=[MB, 2 * MB, 3 * MB, 4 * MB])  # no operator needs 2 of a class


def test_figure5_crossover_and_repair():
    # Paper, 1-based: CLS1 = [1,1,1,1], CNT1 = [4]; CLS2 = [1,2,2,2], CNT2 = [8,1]; CR = 2; 12 MB.
    parent1 = Allocation(FIG5.sizes, [0, 0, 0, 0], [4])
    parent2 = Allocation(FIG5.sizes, [0, 1, 1, 1], [8, 1])
    cls1, cls2 = ao.crossover_lists(parent1.cls, parent2.cls, 2)
    assert cls1.tolist() == [0, 1, 0, 0] and cls2.tolist() == [0, 0, 1, 1]  # [1,2,1,1], [1,1,2,2]
    child1, child2 = ao.crossover(FIG5, parent1, parent2, 2, 12 * MB)
    assert child1.cls.tolist() == [0, 1, 1, 1]       # repaired: [1,2,2,2]
    assert child2.cls.tolist() == [0, 0, 1, 1]       # [1,1,2,2]
    # Extended counts [8,1,4,4] average to [8,3] (20 MB), repaired to [4,2] in 12 MB.
    ext1, _ = ao.crossover_lists([4, 4, 4, 4], [8, 1, 1, 1], 2)
    assert ext1.tolist() == [8, 1, 4, 4]
    assert child1.cnt.tolist() == [4, 2] and child1.pool_bytes == 12 * MB
    assert child2.cnt.tolist() == [4, 1] and child2.pool_bytes == 12 * MB


def test_repair_counts_is_the_paper_repair_above_the_minima():
    # With minima of 1 it is allocator.repair_cnt: [8, 3] -> [4, 2].
    a = ao.repair_counts(FIG5.sizes, [0, 1, 1, 1], [8, 3], np.array([1, 1]), 12 * MB)
    assert a.cnt.tolist() == [4, 2]
    # Minima are kept: the 1 MB class needs 6, so only 6 MB are left for 4 MB objects.
    a = ao.repair_counts(FIG5.sizes, [0, 1, 1, 1], [8, 3], np.array([6, 1]), 12 * MB)
    assert a.cnt.tolist() == [6, 1] and a.pool_bytes <= 12 * MB
    # Counts below the minima are raised even when the budget is loose.
    a = ao.repair_counts(FIG5.sizes, [0, 1, 1, 1], [1, 1], np.array([3, 2]), 100 * MB)
    assert a.cnt.tolist() == [3, 2]
    # Minima that do not fit: returned at the minima, over budget (infeasible, not an error).
    a = ao.repair_counts(FIG5.sizes, [0, 1, 1, 1], [8, 3], np.array([5, 2]), 12 * MB)
    assert a.cnt.tolist() == [5, 2] and a.pool_bytes > 12 * MB


def test_cls_mutation_follows_the_paper_rule():
    rng = np.random.default_rng(0)
    # P = 1: every entry after the first mutates in turn; equal to its predecessor -> +1,
    # one above -> -1, the tail moving with it, so every step flips.
    assert ao.mutate_cls([0, 0, 1, 1], 1.0, rng).tolist() == [0, 1, 1, 2]
    assert ao.mutate_cls([0, 1, 2, 3], 1.0, rng).tolist() == [0, 0, 0, 0]
    assert ao.mutate_cls([0, 0, 1, 1], 0.0, rng).tolist() == [0, 0, 1, 1]
    assert ao.mutate_cls([0], 1.0, rng).tolist() == [0]


def test_count_mutation_is_gaussian_around_the_old_value():
    rng = np.random.default_rng(1)
    old = np.full(4000, 40)
    new = ao.mutate_counts(old, 1.0, rng, sigma=0.25)
    assert abs(new.mean() - 40) < 0.5 and 8 < new.std() < 12 and new.min() >= 1
    assert np.array_equal(ao.mutate_counts(old, 0.0, rng), old)
    some = ao.mutate_counts(old, 0.1, rng)
    assert 0.05 < np.mean(some != old) < 0.15


@st.composite
def allocations(draw, ctx):
    steps = draw(st.lists(st.integers(0, 1), min_size=ctx.num_sizes - 1, max_size=ctx.num_sizes - 1))
    cls = np.concatenate(([0], np.cumsum(steps))).astype(int)
    cnt = draw(st.lists(st.integers(1, 80), min_size=int(cls[-1]) + 1, max_size=int(cls[-1]) + 1))
    return Allocation(ctx.sizes, cls, cnt)


def assert_valid(ctx, alloc, budget):
    assert isinstance(alloc, Allocation)
    assert np.all(alloc.cnt >= ctx.class_minima(alloc.cls))
    if int(ctx.class_minima(alloc.cls) @ alloc.class_slot_bytes) <= budget:
        assert alloc.pool_bytes <= budget
        assert ao.is_feasible(ctx, alloc, budget)
    else:
        assert not ao.is_feasible(ctx, alloc, budget)


@settings(max_examples=80, deadline=None)
@given(st.data(), st.floats(1.0, 3.0), st.integers(0, 2**32 - 1), st.floats(0.0, 1.0))
def test_children_are_valid_within_budget_and_above_minima(data, scale, seed, prob):
    ctx = lstm_context()
    budget = int(tight_budget(lstm()) * scale)
    a1, a2 = data.draw(allocations(ctx)), data.draw(allocations(ctx))
    rng = np.random.default_rng(seed)
    for child in ao.random_crossover(ctx, a1, a2, budget, rng):
        assert_valid(ctx, child, budget)
        assert_valid(ctx, ao.mutate(ctx, child, prob, budget, rng), budget)


def test_random_allocations_fit_even_the_tightest_budget():
    ctx, budget = lstm_context(), tight_budget(lstm())
    for seed in range(20):
        a = ao.random_allocation(ctx, budget, np.random.default_rng(seed))
        assert ao.is_feasible(ctx, a, budget)
    looser = [ao.random_allocation(ctx, 4 * budget, np.random.default_rng(s)) for s in range(10)]
    assert len({a.cls.tobytes() for a in looser}) > 1
    assert all(ao.is_feasible(ctx, a, 4 * budget) for a in looser)


def test_crossover_needs_the_same_sizes():
    other = Allocation([1, 2, 3, 5], [0, 0, 0, 0], [1])
    with pytest.raises(ValueError, match="share their tensor sizes"):
        ao.crossover(FIG5, Allocation(FIG5.sizes, [0, 0, 0, 0], [1]), other, 1, 12 * MB)


def test_transfer_trades_objects_between_two_classes_within_the_budget():
    # Sizes 1, 2, 3, 4 MB in classes [1 MB] and [2-4 MB] (4 MB slots); peaks allow up to 10 each.
    ctx = GraphContext.synthetic(sizes=[MB, 2 * MB, 3 * MB, 4 * MB], peak=[10, 4, 3, 3])
    start = Allocation(ctx.sizes, [0, 1, 1, 1], [8, 2])          # 8 + 8 = 16 MB
    seen = set()
    for seed in range(40):
        child = ao.transfer(ctx, start, 16 * MB, np.random.default_rng(seed))
        assert child.pool_bytes <= 16 * MB and ao.is_feasible(ctx, child, 16 * MB)
        delta = child.cnt - start.cnt
        seen.add(tuple(delta.tolist()))
    # The 4 MB class gains an object for 4 of the 1 MB ones (2 or 3 would take the 1 MB class
    # below its minimum: no trade), or gives one up for 2 more 1 MB ones (their peak is 10).
    assert seen == {(-4, 1), (0, 0), (2, -1)}
    # Nothing to trade: every class at its minimum.
    tight = Allocation(ctx.sizes, [0, 1, 1, 1], [1, 1])
    assert ao.transfer(ctx, tight, 5 * MB, np.random.default_rng(0)).cnt.tolist() == [1, 1]
