"""Tests for allocator/fitting.py: the CNT repair, class merging and the random generator."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from allocator.fitting import (AllocationDoesNotFit, fit_to_budget, merge_classes_to_fit, random_allocation,
                              repair_cnt)
from allocator.size_classes import Allocation, cls_problem

MB = 2**20
FIG5_SIZES = [MB, 2 * MB, 3 * MB, 4 * MB]


@st.composite
def allocations(draw, max_sizes=40, max_count=10**4):
    sizes = sorted(draw(st.lists(st.integers(1, 10**9), min_size=1, max_size=max_sizes, unique=True)))
    steps = draw(st.lists(st.integers(0, 1), min_size=len(sizes) - 1, max_size=len(sizes) - 1))
    cls = np.concatenate(([0], np.cumsum(steps, dtype=np.int64)))
    k = int(cls[-1]) + 1
    cnt = draw(st.lists(st.integers(1, max_count), min_size=k, max_size=k))
    return Allocation(sizes, cls, cnt)


def reference_repair_cnt(alloc, budget):
    """Brute force over the per-class byte give-ups at which any count changes."""
    slot, cnt = alloc.class_slot_bytes, alloc.cnt
    candidates = sorted({0} | {int(m * s) for s, c in zip(slot, cnt) for m in range(1, int(c))})
    for t in candidates:
        shrunk = np.maximum(cnt - t // slot, 1)
        if shrunk @ slot <= budget:
            return shrunk
    return None


# --- repair_cnt ---

def test_figure5_count_repair():
    # Child 1 of Figure 5: 8 objects of 1 MB and 3 of 4 MB is 20 MB; the budget is 12 MB.
    child = Allocation(FIG5_SIZES, [0, 1, 1, 1], [8, 3])
    repaired = repair_cnt(child, 12 * MB)
    assert repaired.cnt.tolist() == [4, 2]  # each class gives up 4 MB: 4 x 1 MB, 1 x 4 MB
    assert repaired.pool_bytes == 12 * MB and np.array_equal(repaired.cls, child.cls)


def test_repair_cnt_keeps_what_fits_and_refuses_the_impossible():
    alloc = Allocation(FIG5_SIZES, [0, 1, 2, 3], [1, 1, 1, 1])
    assert repair_cnt(alloc, 10 * MB) is alloc
    with pytest.raises(AllocationDoesNotFit, match="4 size classes need 10.0 MiB") as info:
        repair_cnt(alloc, 10 * MB - 1)
    assert "\n" not in str(info.value) and isinstance(info.value, ValueError)


def test_repair_cnt_takes_only_what_is_needed():
    alloc = Allocation([MB, 4 * MB], [0, 1], [8, 3])
    assert repair_cnt(alloc, 19 * MB).cnt.tolist() == [7, 3]  # the big class is untouched
    assert repair_cnt(alloc, 5 * MB).cnt.tolist() == [1, 1]


@settings(max_examples=150, deadline=None)
@given(allocations(), st.floats(0.0, 1.2))
def test_repair_cnt_fits_whenever_possible(alloc, fraction):
    budget = int(alloc.min_pool_bytes + fraction * (alloc.pool_bytes - alloc.min_pool_bytes))
    repaired = repair_cnt(alloc, budget)
    assert repaired.pool_bytes <= budget
    assert np.array_equal(repaired.cls, alloc.cls)
    assert np.all(repaired.cnt >= 1) and np.all(repaired.cnt <= alloc.cnt)
    if alloc.pool_bytes <= budget:
        assert repaired is alloc


@settings(max_examples=80, deadline=None)
@given(allocations(max_sizes=6, max_count=30), st.floats(0.0, 1.0))
def test_repair_cnt_matches_brute_force(alloc, fraction):
    budget = int(alloc.min_pool_bytes + fraction * (alloc.pool_bytes - alloc.min_pool_bytes))
    assert repair_cnt(alloc, budget).cnt.tolist() == reference_repair_cnt(alloc, budget).tolist()


@given(allocations(), st.integers(1, 10**9))
def test_repair_cnt_raises_exactly_when_nothing_fits(alloc, budget):
    if alloc.min_pool_bytes > budget:
        with pytest.raises(AllocationDoesNotFit):
            repair_cnt(alloc, budget)
    else:
        assert repair_cnt(alloc, budget).pool_bytes <= budget


# --- merge_classes_to_fit / fit_to_budget ---

def test_merge_folds_the_classes_below_the_top():
    alloc = Allocation(FIG5_SIZES, [0, 1, 2, 3], [5, 6, 7, 8])
    merged = merge_classes_to_fit(alloc, 7 * MB)  # 1 + 2 + 4 MB with classes 2, 3 merged
    assert merged.cls.tolist() == [0, 1, 2, 2] and merged.cnt.tolist() == [5, 6, 15]
    assert merge_classes_to_fit(alloc, 10 * MB) is alloc
    assert merge_classes_to_fit(alloc, 4 * MB).cls.tolist() == [0, 0, 0, 0]
    with pytest.raises(AllocationDoesNotFit, match="smallest budget that could hold it is 4194304"):
        merge_classes_to_fit(alloc, 4 * MB - 1)


@given(allocations(), st.floats(0.0, 1.5))
def test_fit_to_budget_always_fits(alloc, fraction):
    largest = int(alloc.class_slot_bytes[-1])
    budget = int(largest + fraction * (alloc.min_pool_bytes - largest))
    fitted = fit_to_budget(alloc, budget)
    assert fitted.pool_bytes <= budget and np.array_equal(fitted.sizes, alloc.sizes)
    assert fitted.num_classes <= alloc.num_classes


# --- generators ---

@settings(max_examples=150, deadline=None)
@given(allocations(max_sizes=100), st.floats(1.0, 50.0), st.integers(0, 2**32 - 1))
def test_random_allocation_is_always_valid(shape, slack, seed):
    budget = int(shape.class_slot_bytes[-1] * slack)
    alloc = random_allocation(shape.sizes, budget, np.random.default_rng(seed))
    assert cls_problem(alloc.cls) is None and alloc.is_valid(budget)
    again = random_allocation(shape.sizes, budget, np.random.default_rng(seed))
    assert again == alloc


def test_random_allocation_varies_caps_and_refuses():
    sizes = np.arange(1, 21) * 1000
    rng = np.random.default_rng(0)
    seen = {random_allocation(sizes, 10**6, rng) for _ in range(20)}
    assert len(seen) == 20
    capped = random_allocation(sizes, 10**9, rng, max_counts=np.full(20, 3))
    per_class = np.bincount(capped.cls, minlength=capped.num_classes) * 3
    assert np.all(capped.cnt <= per_class)
    with pytest.raises(AllocationDoesNotFit):
        random_allocation(sizes, 19_999, rng)


def test_fit_to_budget_shrinks_counts_then_merges_classes():
    one_per_size = Allocation(FIG5_SIZES, [0, 1, 2, 3], [8, 1, 2, 1])
    assert fit_to_budget(one_per_size, 100 * MB) == one_per_size
    shrunk = fit_to_budget(one_per_size, 12 * MB)
    assert shrunk.cls.tolist() == [0, 1, 2, 3] and shrunk.pool_bytes <= 12 * MB
    merged = fit_to_budget(one_per_size, 7 * MB)
    assert merged.cls.tolist() == [0, 1, 2, 2] and merged.pool_bytes <= 7 * MB
    with pytest.raises(AllocationDoesNotFit):
        fit_to_budget(Allocation(FIG5_SIZES, [0, 1, 2, 3], [1, 1, 1, 1]), MB)
