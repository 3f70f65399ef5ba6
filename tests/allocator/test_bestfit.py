import numpy as np
import pytest

from allocator.bestfit import LARGE_SEGMENT, MIN_BLOCK, SMALL_SEGMENT, BestFitAllocator
from allocator.online import AllocatorMisuse, UnknownAllocator, make_online_allocator
from engine.program import Arena

from .online_checks import assert_live_objects_disjoint, random_workload

MIB = 1 << 20


def test_random_workloads_keep_live_objects_apart_and_count_bytes():
    for seed in range(4):
        random_workload(make_online_allocator("bestfit", 64 * MIB), 500, 8 * MIB, seed)


def test_requests_round_to_512_and_small_ones_share_a_2_mib_segment():
    a = BestFitAllocator(64 * MIB)
    x, y = a.alloc(1), a.alloc(700)
    lay = a.layout()
    assert lay.object_bytes.tolist() == [MIN_BLOCK, 2 * MIN_BLOCK]
    assert lay.object_offset.tolist() == [0, MIN_BLOCK]          # split from one segment
    assert a.stats().reserved_bytes == SMALL_SEGMENT and a.stats().requested_bytes == 701


def test_a_freed_block_is_reused_best_fit_and_coalesced_with_free_neighbours():
    a = BestFitAllocator(64 * MIB)
    objs = [a.alloc(n) for n in (4096, 8192, 4096, 2048)]
    off = a.layout().object_offset
    a.free(objs[1])                       # an 8 KiB hole between two live blocks
    a.free(objs[3])                       # and the tail, which merges with the segment's rest
    small = a.alloc(8000)                 # best fit: the 8 KiB hole, not the big tail
    assert a.layout().object_offset[small] == off[objs[1]]
    a.free(small)
    a.free(objs[2])                       # the hole, objs[2] and the tail coalesce into one block
    big = a.alloc(MIB)                    # the one free block starts at the hole: they did
    assert a.layout().object_offset[big] == off[objs[1]]
    assert a.stats().reserved_bytes == SMALL_SEGMENT


def test_large_requests_take_a_20_mib_segment_and_split_only_above_1_mib():
    a = BestFitAllocator(256 * MIB)
    x = a.alloc(3 * MIB)
    assert a.stats().reserved_bytes == LARGE_SEGMENT
    y = a.alloc(16 * MIB + 512 * 1024)        # 17 MiB - 512 KiB... the 17 MiB rest fits
    assert a.layout().object_offset[y] == a.layout().object_offset[x] + 3 * MIB
    # the rest, 512 KiB, is below the large pool's split threshold: it stays with y
    assert a.layout().object_bytes[y] == LARGE_SEGMENT - 3 * MIB
    big = a.alloc(30 * MIB)                   # >= 10 MiB: its own segment, rounded to 2 MiB
    assert a.stats().reserved_bytes == 2 * LARGE_SEGMENT - 20 * MIB + 30 * MIB
    assert_live_objects_disjoint(a, [x, y, big])


def test_full_capacity_releases_free_cached_segments_then_gives_none():
    a = BestFitAllocator(40 * MIB)
    x = a.alloc(3 * MIB)                      # segment 1 (20 MiB)
    y = a.alloc(3 * MIB)                      # split from segment 1
    z = a.alloc(18 * MIB)                     # its own 18 MiB segment at 20 MiB
    a.free(z)                                 # cached: still reserved
    assert a.stats().reserved_bytes == 38 * MIB
    w = a.alloc(19 * MIB)                     # needs 20 MiB: only after releasing z's segment
    assert w is not None and a.stats().reserved_bytes == 40 * MIB
    assert a.alloc(MIB) is None               # nothing left, nothing cached to release
    a.free(x)
    a.free(y)
    assert a.alloc(18 * MIB) is not None      # from segment 1's coalesced free block


def test_external_fragmentation_is_visible_as_reserved_over_requested():
    a = BestFitAllocator(200 * MIB)
    blocks = [a.alloc(3 * MIB) for _ in range(12)]
    for o in blocks[::2]:
        a.free(o)                             # 3 MiB holes that a 4 MiB request cannot use
    assert a.alloc(4 * MIB) is not None
    s = a.stats()
    assert s.reserved_bytes >= 2 * s.requested_bytes - 8 * MIB


def test_misuse_and_unknown_names_are_one_line_errors():
    a = BestFitAllocator(MIB)
    with pytest.raises(AllocatorMisuse, match="not live"):
        a.free(0)
    o = a.alloc(10)
    a.free(o)
    with pytest.raises(AllocatorMisuse, match="freed already"):
        a.free(o)
    with pytest.raises(UnknownAllocator, match="choose from bestfit, va"):
        make_online_allocator("buddy", MIB)
    with pytest.raises(UnknownAllocator, match="does not take"):
        make_online_allocator("bestfit", MIB, chunk_bytes=4096)


def test_tiny_budgets_get_exact_segments_instead_of_failing():
    a = BestFitAllocator(64 * 1024)           # far below a 2 MiB segment
    objs = [a.alloc(16 * 1024) for _ in range(4)]
    assert None not in objs and a.alloc(1) is None
    arena = Arena.of(a.layout(), 1024)
    assert arena.arena_bytes == 64 * 1024 + 1024 and arena.allocator["name"] == "bestfit"


def test_oldest_within_takes_the_block_freed_earliest_among_near_best_fits():
    def three_holes(oldest_within):
        a = BestFitAllocator(64 * MIB, oldest_within=oldest_within)
        objs = [a.alloc(n) for n in (4096, 512, 8192, 512, 4096, 512)]   # 512 B fences keep holes apart
        for o in (objs[2], objs[4], objs[0]):     # freed in this order: 8 KiB, then the two 4 KiB
            a.free(o)
        return a, objs

    def placed_at(oldest_within):
        a, objs = three_holes(oldest_within)
        o = a.alloc(4096)
        off = a.layout().object_offset
        return objs.index(next(x for x in objs if off[x] == off[o])), a
    assert placed_at(None)[0] == 0               # PyTorch: the best fit by size, then address
    assert placed_at(0.0)[0] == 4                # equal sizes only: the 4 KiB freed first
    which, a = placed_at(1.0)                    # up to twice the size: the 8 KiB, freed first of all
    assert which == 2 and a.layout().describe()["oldest_within"] == 1.0
    with pytest.raises(AllocatorMisuse, match="oldest_within must be >= 0"):
        BestFitAllocator(MIB, oldest_within=-1)


def test_oldest_within_keeps_live_objects_apart_on_random_workloads():
    for seed in range(2):
        random_workload(make_online_allocator("bestfit", 64 * MIB, oldest_within=1.0), 500, 8 * MIB, seed)


def _whole_free_by_walking(a: BestFitAllocator) -> set[int]:
    """The segments that are one free block, found by walking every segment (the definition)."""
    return {seg for seg, b in a._segment_first.items() if b.obj == -1 and b.prev is None and b.next is None}


def test_the_segments_a_release_gives_back_are_tracked_exactly():
    """The allocator keeps the wholly free segments as blocks are cached and taken instead of
    walking every segment at each failed request: after every request, free and release, the
    kept set equals the walk's, under a capacity tight enough that releases happen; so are the
    holes' lengths, by which a request longer than every hole fails at once."""
    rng = np.random.default_rng(0)
    a = BestFitAllocator(96 * MIB)
    released = []
    release = a._release_cached_segments

    def counted_release():
        released.append(len(a._whole_free))
        release()
    a._release_cached_segments = counted_release
    live = []
    for _ in range(3000):
        if live and rng.random() < 0.45:
            a.free(live.pop(int(rng.integers(len(live)))))
        else:
            n = int(rng.choice([rng.integers(1, SMALL_SEGMENT), rng.integers(MIB, 30 * MIB)]))
            obj = a.alloc(n)
            if obj is not None:
                live.append(obj)
        assert set(a._whole_free) == _whole_free_by_walking(a)
        assert a._hole_lengths == sorted(length for _, length in a._holes)    # the longest hole, kept
    assert sum(n > 0 for n in released) > 10     # the tight capacity made it give segments back
    assert len(a._holes) > 2                     # and holes between segments, joined as they came back
