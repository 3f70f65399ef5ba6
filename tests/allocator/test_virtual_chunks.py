import numpy as np
import pytest

from allocator.online import AllocatorMisuse, make_online_allocator
from allocator.virtual_chunks import PAGE, VirtualChunkAllocator
from engine.program import Arena

from .online_checks import assert_live_objects_disjoint, random_workload

CHUNK = 16 * 1024


def va(chunks: int, **kw) -> VirtualChunkAllocator:
    return make_online_allocator("va", chunks * CHUNK, chunk_bytes=CHUNK, **kw)


def test_random_workloads_keep_live_objects_apart_and_count_bytes():
    for seed in range(4):
        random_workload(va(40), 500, 6 * CHUNK, seed)


def test_a_request_takes_ceil_m_over_chunk_chunks_that_need_not_be_adjacent():
    a = va(8, small_bytes=0)
    x, y, z = a.alloc(CHUNK), a.alloc(CHUNK), a.alloc(CHUNK)      # chunks 0, 1, 2
    a.free(x)
    a.free(z)
    w = a.alloc(2 * CHUNK + 1)             # 3 chunks: 0 and 2 (free, apart), then 3 (untouched)
    arena = Arena.of(a.layout(), 0)
    assert arena.object_bytes[w] == 3 * CHUNK
    assert arena.physical_extents(w) == [(0, CHUNK), (2 * CHUNK, 2 * CHUNK)]   # chunks 2, 3: one row
    # one contiguous virtual range, never one used before
    assert arena.object_offset[w] >= arena.object_offset[z] + CHUNK
    assert a.stats().reserved_bytes == 4 * CHUNK == arena.arena_bytes
    assert_live_objects_disjoint(a, [y, w])


def test_no_external_fragmentation_freed_chunks_serve_any_size():
    a = va(10, small_bytes=0)
    objs = [a.alloc(CHUNK) for _ in range(10)]
    assert a.alloc(1) is None                      # full
    for o in objs[::2]:
        a.free(o)                                  # five free chunks, none adjacent
    big = a.alloc(5 * CHUNK)                       # still one object of five chunks
    assert big is not None and a.stats().reserved_bytes == 10 * CHUNK
    assert a.alloc(1) is None


def test_internal_fragmentation_is_below_one_chunk_per_live_object():
    a = va(200)
    rng = np.random.default_rng(0)
    live = {}
    for n in rng.integers(1, 5 * CHUNK, 60):
        o = a.alloc(int(n))
        live[o] = int(n)
    lay = a.layout()
    for o, n in live.items():
        assert 0 <= lay.object_bytes[o] - n < CHUNK
    s = a.stats()
    assert s.reserved_bytes - s.requested_bytes < len(live) * CHUNK


def test_small_requests_share_a_chunk_in_page_slots():
    a = va(4)
    objs = [a.alloc(100) for _ in range(CHUNK // PAGE)]       # 4 KiB slots: one chunk's worth
    arena = Arena.of(a.layout(), 0)
    assert a.stats().reserved_bytes == CHUNK
    assert sorted(arena.physical_extents(o)[0][0] for o in objs) == list(range(0, CHUNK, PAGE))
    extra = a.alloc(100)                                       # the next slot needs a second chunk
    assert Arena.of(a.layout(), 0).physical_extents(extra)[0][0] == CHUNK
    for o in objs:
        a.free(o)                                              # the first chunk is whole again
    whole = a.alloc(CHUNK)
    assert Arena.of(a.layout(), 0).physical_extents(whole) == [(0, CHUNK)]


def test_none_when_the_chunks_cannot_hold_it_and_bad_parameters_are_refused():
    a = va(3, small_bytes=0)
    assert a.alloc(3 * CHUNK + 1) is None
    assert a.alloc(3 * CHUNK) is not None
    with pytest.raises(AllocatorMisuse, match="multiple of 4096"):
        VirtualChunkAllocator(CHUNK, chunk_bytes=1000)
    with pytest.raises(AllocatorMisuse, match="half a chunk"):
        VirtualChunkAllocator(CHUNK, chunk_bytes=CHUNK, small_bytes=CHUNK)


def test_the_page_table_rows_are_whole_chunks_and_cover_every_object():
    a = va(12)
    random_workload(a, 200, 4 * CHUNK, seed=7)
    arena = Arena.of(a.layout(), 0)
    rows = arena.mappings
    assert (rows[:, 2] % CHUNK == 0).all() and (rows % PAGE == 0).all()
    for o in range(arena.num_objects):
        assert sum(n for _, n in arena.physical_extents(o)) == arena.object_bytes[o]
