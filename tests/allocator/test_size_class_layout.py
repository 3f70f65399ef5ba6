"""Tests for allocator/size_class_layout.py: objects laid out at aligned, disjoint offsets in one arena."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from allocator.size_class_layout import SizeClassLayout
from allocator.size_classes import ALIGNMENT, Allocation

MB = 2**20


def test_figure5_child_layout():
    layout = SizeClassLayout.from_allocation(Allocation([MB, 2 * MB, 3 * MB, 4 * MB], [0, 1, 1, 1], [4, 2]))
    assert layout.object_class.tolist() == [0, 0, 0, 0, 1, 1]
    assert layout.object_offset.tolist() == [0, MB, 2 * MB, 3 * MB, 4 * MB, 8 * MB]
    assert layout.object_bytes.tolist() == [MB] * 4 + [4 * MB] * 2
    assert layout.class_first_object.tolist() == [0, 4, 6]
    assert layout.arena_bytes == 12 * MB
    assert layout.objects_of_class(1) == range(4, 6)
    assert layout.num_objects == 6 and layout.num_classes == 2


def test_objects_are_padded_to_alignment():
    layout = SizeClassLayout.from_allocation(Allocation([3, 700], [0, 1], [2, 1]))
    assert layout.object_offset.tolist() == [0, 256, 512]
    assert layout.object_bytes.tolist() == [256, 256, 768]
    assert layout.arena_bytes == 1280
    with pytest.raises(ValueError):
        layout.object_offset[0] = 1


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_objects_are_disjoint_aligned_and_inside_the_arena(data):
    sizes = sorted(data.draw(st.lists(st.integers(1, 10**8), min_size=1, max_size=60, unique=True)))
    steps = data.draw(st.lists(st.integers(0, 1), min_size=len(sizes) - 1, max_size=len(sizes) - 1))
    cls = np.concatenate(([0], np.cumsum(steps, dtype=np.int64)))
    k = int(cls[-1]) + 1
    alloc = Allocation(sizes, cls, data.draw(st.lists(st.integers(1, 200), min_size=k, max_size=k)))
    layout = SizeClassLayout.from_allocation(alloc)

    start, end = layout.object_offset, layout.object_offset + layout.object_bytes
    order = np.argsort(start, kind="stable")
    assert np.all(end[order][:-1] <= start[order][1:])  # no two objects overlap
    assert start.min() >= 0 and end.max() <= layout.arena_bytes
    assert np.all(start % ALIGNMENT == 0) and np.all(layout.object_bytes % ALIGNMENT == 0)
    assert layout.arena_bytes == alloc.pool_bytes and layout.num_objects == alloc.num_objects
    assert np.all(layout.object_bytes >= alloc.class_object_bytes[layout.object_class])
    for c in range(k):
        ids = np.arange(layout.class_first_object[c], layout.class_first_object[c + 1])
        assert ids.size == alloc.cnt[c] and np.all(layout.object_class[ids] == c)
