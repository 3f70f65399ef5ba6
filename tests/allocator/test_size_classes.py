"""Tests for allocator/size_classes.py: the (TS, CLS, CNT) encoding and its budget-free repairs."""
import json

import numpy as np
import pytest
from hypothesis import given, strategies as st

from allocator.size_classes import (ALIGNMENT, Allocation, aligned_bytes, cls_problem,
                                    counts_from_extended, distinct_sizes, extended_counts,
                                    repair_cls)

MB = 2**20
FIG5_SIZES = [MB, 2 * MB, 3 * MB, 4 * MB]


# --- strategies shared in spirit with test_budget / test_pool ---

@st.composite
def valid_cls(draw, max_sizes=100):
    n = draw(st.integers(1, max_sizes))
    steps = draw(st.lists(st.integers(0, 1), min_size=n - 1, max_size=n - 1))
    return np.concatenate(([0], np.cumsum(steps, dtype=np.int64)))


# --- construction and derived views ---

def test_figure1_coarse_and_fine_allocations():
    coarse = Allocation([MB, 2 * MB], [0, 0], [5])
    fine = Allocation([MB, 2 * MB], [0, 1], [8, 1])
    assert coarse.class_object_bytes.tolist() == [2 * MB]
    assert fine.class_object_bytes.tolist() == [MB, 2 * MB]
    assert coarse.pool_bytes == fine.pool_bytes == 10 * MB
    assert coarse.num_objects == 5 and fine.num_objects == 9
    assert fine.is_valid(10 * MB) and not fine.is_valid(10 * MB - 1)


def test_object_bytes_are_class_maxima_and_pool_is_padded():
    alloc = Allocation([10, 300, 512, 1000], [0, 0, 1, 1], [3, 2])
    assert alloc.class_object_bytes.tolist() == [300, 1000]
    assert alloc.class_slot_bytes.tolist() == [512, 1024]
    assert alloc.pool_bytes == 3 * 512 + 2 * 1024
    assert alloc.min_pool_bytes == 512 + 1024
    assert aligned_bytes(0) == 0 and aligned_bytes(1) == ALIGNMENT and aligned_bytes(256) == 256


def test_class_of_size_exact_inexact_and_vectorised():
    alloc = Allocation([10, 20, 30, 40], [0, 1, 1, 2], [1, 1, 1])
    assert alloc.class_of_size(30) == 1 and isinstance(alloc.class_of_size(30), int)
    assert alloc.class_of_size(np.array([[10, 40], [20, 30]])).tolist() == [[0, 2], [1, 1]]
    assert alloc.class_of_size([5, 25, 31], exact=False).tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="not one of"):
        alloc.class_of_size(25)
    with pytest.raises(ValueError, match="larger than the largest"):
        alloc.class_of_size([10, 41], exact=False)


def test_arrays_are_read_only_copies():
    sizes = np.array([1, 2, 3])
    alloc = Allocation(sizes, [0, 1, 1], [2, 2])
    sizes[0] = 99
    assert alloc.sizes[0] == 1
    with pytest.raises(ValueError):
        alloc.cnt[0] = 5
    assert alloc.sizes.dtype == alloc.cls.dtype == alloc.cnt.dtype == np.int64


def test_equality_hash_and_with_counts():
    a = Allocation([1, 2], [0, 1], [3, 4])
    assert a == Allocation((1, 2), (0, 1), (3, 4)) and hash(a) == hash(Allocation([1, 2], [0, 1], [3, 4]))
    b = a.with_counts([3, 5])
    assert b != a and b.cls is a.cls and a.cnt.tolist() == [3, 4]


def test_str_lists_every_class():
    text = str(Allocation(FIG5_SIZES, [0, 1, 1, 1], [4, 2]))
    assert text.splitlines() == [
        "Allocation: 2 size classes, 6 objects, pool 12.0 MiB",
        "  class 0: 4 x 1.0 MiB  for 1 size (1.0 MiB)",
        "  class 1: 2 x 4.0 MiB  for 3 sizes (2.0 MiB .. 4.0 MiB)",
    ]


@pytest.mark.parametrize("sizes, cls, cnt, message", [
    ([], [], [], "sizes are empty"),
    ([0, 1], [0, 0], [1], "positive"),
    ([2, 1], [0, 0], [1], "strictly increasing"),
    ([1, 1], [0, 0], [1], "strictly increasing"),
    ([1, 2], [0], [1], "cls has 1 entries for 2 sizes"),
    ([1, 2], [1, 1], [1], "start at class 0"),
    ([1, 2, 3], [0, 2, 2], [1, 1, 1], "goes 0 -> 2 at index 1"),
    ([1, 2, 3], [0, 1, 0], [1, 1], "goes 1 -> 0 at index 2"),
    ([1, 2], [0, 1], [1], "cnt has 1 entries for 2 size classes"),
    ([1, 2], [0, 1], [1, 0], "cnt\\[1\\] is 0"),
    ([1.5, 2], [0, 1], [1, 1], "must hold integers"),
    ([[1, 2]], [0, 1], [1, 1], "flat list"),
])
def test_invalid_allocations_raise_one_line(sizes, cls, cnt, message):
    with pytest.raises(ValueError, match=message) as info:
        Allocation(sizes, cls, cnt)
    assert "\n" not in str(info.value)


def test_dict_round_trip_through_json():
    alloc = Allocation(FIG5_SIZES, [0, 1, 1, 1], [4, 2])
    data = json.loads(json.dumps(alloc.to_dict()))
    assert data == {"sizes": FIG5_SIZES, "cls": [0, 1, 1, 1], "cnt": [4, 2]}
    assert Allocation.from_dict(data) == alloc


@pytest.mark.parametrize("data, message", [
    ([1, 2], "must be a mapping"),
    ({"sizes": [1], "cls": [0]}, "missing 'cnt'"),
    ({"sizes": [1], "cls": [0], "cnt": [1], "count": [1]}, "unknown keys 'count'"),
    ({"sizes": "12", "cls": [0], "cnt": [1]}, "'sizes' must be a list of integers"),
    ({"sizes": [1.0], "cls": [0], "cnt": [1]}, "'sizes' must be a list of integers"),
    ({"sizes": [1], "cls": [True], "cnt": [1]}, "'cls' must be a list of integers"),
    ({"sizes": [1], "cls": [0], "cnt": [0]}, "needs at least 1 object"),
    ({"sizes": [1, 2], "cls": [0, 3], "cnt": [1]}, "goes 0 -> 3"),
])
def test_from_dict_rejects_malformed_input_with_one_line(data, message):
    with pytest.raises(ValueError, match=message) as info:
        Allocation.from_dict(data)
    assert "\n" not in str(info.value)


def test_distinct_sizes():
    assert distinct_sizes([4, 1, 4, 2]).tolist() == [1, 2, 4]
    assert distinct_sizes(x for x in (3, 3)).tolist() == [3]
    assert distinct_sizes(np.array([5, 5])).dtype == np.int64


# --- repairs: the paper's Figure 5 ---

def crossover(a, b, point):
    """The paper's one-point crossover of two equal-length lists (for tests; ga/ owns the real one)."""
    return np.concatenate((b[:point], a[point:])), np.concatenate((a[:point], b[point:]))


def test_figure5_crossover_and_repair_of_cls_and_counts():
    # Paper, 1-based: CLS1 = [1,1,1,1], CNT1 = [4]; CLS2 = [1,2,2,2], CNT2 = [8,1]; CR = 2.
    parent1 = Allocation(FIG5_SIZES, [0, 0, 0, 0], [4])
    parent2 = Allocation(FIG5_SIZES, [0, 1, 1, 1], [8, 1])
    assert extended_counts(parent1).tolist() == [4, 4, 4, 4]
    assert extended_counts(parent2).tolist() == [8, 1, 1, 1]

    cls_c1, cls_c2 = crossover(parent1.cls, parent2.cls, 2)
    assert cls_c1.tolist() == [0, 1, 0, 0] and cls_c2.tolist() == [0, 0, 1, 1]
    assert repair_cls(cls_c1).tolist() == [0, 1, 1, 1]  # paper: [1,2,1,1] -> [1,2,2,2]
    assert repair_cls(cls_c2).tolist() == [0, 0, 1, 1]

    ext_c1, ext_c2 = crossover(extended_counts(parent1), extended_counts(parent2), 2)
    assert ext_c1.tolist() == [8, 1, 4, 4] and ext_c2.tolist() == [4, 4, 1, 1]
    # Child 1 uses its repaired CLS: class 1 holds 2, 3 and 4 MB, mean (1 + 4 + 4) / 3 = 3.
    assert counts_from_extended(repair_cls(cls_c1), ext_c1).tolist() == [8, 3]
    assert counts_from_extended(cls_c2, ext_c2).tolist() == [4, 1]
    assert Allocation(FIG5_SIZES, repair_cls(cls_c1), [8, 3]).pool_bytes == 20 * MB


def test_repair_cls_other_cases():
    assert repair_cls([1, 2, 1, 1]).tolist() == [0, 1, 1, 1]  # 1-based input: shifted first
    assert repair_cls([0, 3, 3, 7]).tolist() == [0, 1, 1, 2]  # jumps lowered to +1
    # A deep dip moves the whole tail, keeping its inherited class boundary (0,0 | 1,1).
    assert repair_cls([0, 1, 2, 3, 0, 0, 1, 1]).tolist() == [0, 1, 2, 3, 3, 3, 4, 4]
    assert repair_cls([5]).tolist() == [0]
    with pytest.raises(ValueError, match="non-empty"):
        repair_cls([])


def test_counts_from_extended_rounds_half_up_and_keeps_one():
    assert counts_from_extended([0, 0, 1], [1, 2, 7]).tolist() == [2, 7]  # 1.5 -> 2
    assert counts_from_extended([0, 0, 0], [1, 1, 2]).tolist() == [1]  # 1.33 -> 1
    assert counts_from_extended([0, 1], [0, 0]).tolist() == [1, 1]
    with pytest.raises(ValueError, match="repair_cls"):
        counts_from_extended([0, 2], [1, 1])
    with pytest.raises(ValueError, match="3 entries for 2 sizes"):
        counts_from_extended([0, 1], [1, 1, 1])


# --- repairs: properties ---

@given(st.lists(st.integers(-50, 50), min_size=1, max_size=100))
def test_repair_cls_output_is_valid_and_changes_only_bad_steps(values):
    repaired = repair_cls(values)
    assert cls_problem(repaired) is None and repaired.size == len(values)
    assert np.array_equal(repair_cls(repaired), repaired)
    steps_in, steps_out = np.diff(values), np.diff(repaired)
    good = (steps_in == 0) | (steps_in == 1)
    assert np.array_equal(steps_out[good], steps_in[good])


@given(valid_cls(), st.integers(-5, 5))
def test_repair_cls_leaves_valid_sequences_unchanged_up_to_shift(cls, shift):
    assert np.array_equal(repair_cls(cls), cls)
    assert np.array_equal(repair_cls(cls + shift), cls)


@given(valid_cls(), st.data())
def test_extended_counts_round_trip(cls, data):
    k = int(cls[-1]) + 1
    cnt = np.array(data.draw(st.lists(st.integers(1, 10**4), min_size=k, max_size=k)))
    alloc = Allocation(np.arange(1, cls.size + 1) * 100, cls, cnt)
    ext = extended_counts(alloc)
    assert ext.size == cls.size
    assert np.array_equal(counts_from_extended(cls, ext), cnt)
