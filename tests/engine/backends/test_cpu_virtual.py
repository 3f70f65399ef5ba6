"""Virtual addressing on the cpu backend (paper 001's ``va``): real mappings of a memory file's
chunks into a reserved virtual range, the verifier's physical view, and a verified Program run
through the executor on a page table, bit-identical to the numpy reference."""
import dataclasses

import numpy as np
import pytest

import zoo
from allocator.virtual_chunks import VirtualChunkAllocator
from engine.backends.cpu import CpuBackend, EmulatedLink
from engine.executor import ProgramExecutor
from engine.program import Arena, Program, sharing_objects
from engine.training import Trainer
from planner.policy import plan_with
from planner.verify import VerificationError, verify

CHUNK = 16 * 1024
LINK = EmulatedLink(h2d_bytes_per_s=20e9, d2h_bytes_per_s=20e9, duplex_bytes_per_s=32e9, latency_s=0)


def test_a_tensor_over_two_non_adjacent_chunks_is_one_contiguous_array():
    be = CpuBackend()
    try:
        # virtual [0, 2 chunks) -> physical chunk 3 then chunk 0: apart, and in reverse order
        rows = np.array([[0, 3 * CHUNK, CHUNK], [CHUNK, 0, CHUNK]])
        be.allocate_virtual_arena(4 * CHUNK, 0, rows, 2 * CHUNK)
        n = 2 * CHUNK // 4
        x = be.view(0, (n,), np.float32)
        assert x.flags.c_contiguous and x.size * 4 == 2 * CHUNK
        be.write(x, np.arange(n, dtype=np.float32))           # through the view ...
        phys = be._mapped.physical
        first = phys[3 * CHUNK:4 * CHUNK].view(np.float32)
        second = phys[0:CHUNK].view(np.float32)
        assert np.array_equal(first, np.arange(n // 2, dtype=np.float32))     # ... lands in chunk 3
        assert np.array_equal(second, np.arange(n // 2, n, dtype=np.float32))  # and in chunk 0
        assert (phys[CHUNK:3 * CHUNK] == 0xFF).all()          # the chunks between: untouched poison
        second[:] = -1.0                                       # the other way round
        assert (be.read(x)[n // 2:] == -1.0).all() and np.array_equal(be.read(x)[:n // 2], first)
    finally:
        be.close()


def test_two_virtual_ranges_over_one_chunk_see_the_same_bytes():
    be = CpuBackend()
    try:
        be.allocate_virtual_arena(CHUNK, 0, np.array([[0, 0, CHUNK], [4 * CHUNK, 0, CHUNK]]), 5 * CHUNK)
        a, b = be.view(0, (CHUNK,), np.uint8), be.view(4 * CHUNK, (CHUNK,), np.uint8)
        a[:] = 7
        assert (b == 7).all() and not np.shares_memory(a, b)   # numpy cannot tell: only physics can
    finally:
        be.close()


def test_a_misaligned_page_table_is_refused_in_one_line():
    be = CpuBackend()
    try:
        with pytest.raises(Exception, match="not aligned to the host's 4096-byte pages"):
            be.allocate_virtual_arena(CHUNK, 0, np.array([[0, 100, CHUNK]]), CHUNK)
    finally:
        be.close()


def on_scattered_chunks(program: Program, chunk: int = CHUNK) -> Program:
    """``program`` with every object moved to a va object of its size, on chunks scattered by
    freeing every other chunk of a first fill (so multi-chunk objects span non-adjacent chunks)."""
    arena = program.arena
    fill_chunks = 2 * arena.num_objects + 8
    chunks = fill_chunks + int(sum(-(-int(n) // chunk) for n in arena.object_bytes))
    a = VirtualChunkAllocator(chunks * chunk, chunk_bytes=chunk, small_bytes=0)
    fill = [a.alloc(chunk) for _ in range(fill_chunks)]
    for o in fill[::2]:
        a.free(o)
    first = len(fill)
    ids = [a.alloc(int(n)) for n in arena.object_bytes]
    assert ids == list(range(first, first + arena.num_objects))
    lay = a.layout()
    moved = Arena(lay.object_offset[first:], arena.object_bytes.copy(), lay.arena_bytes + arena.scratch_bytes,
                  arena.scratch_bytes, lay.describe(), lay.mappings, lay.virtual_bytes)
    return dataclasses.replace(program, arena=moved)


@pytest.fixture(scope="module")
def tight():
    g = zoo.tiny("wresnet")
    from planner.facts import GraphFacts
    budget = int(GraphFacts(g).smallest_budget * 1.5)
    program = plan_with("swapadvisor", g, budget)
    return g, program


def test_a_program_on_a_page_table_runs_bit_identical_to_the_reference(tight):
    g, program = tight
    moved = on_scattered_chunks(program)
    verify(moved, g)
    spans = [len(moved.arena.physical_extents(o)) for o in range(moved.arena.num_objects)]
    assert max(spans) >= 2, "some object should span non-adjacent chunks"
    ref = Trainer(g, seed=0)
    for _ in range(3):
        ref.step()
    backend = CpuBackend(LINK, sanitize=True, seed=1, jitter_s=2e-4)
    try:
        tr = Trainer(g, seed=0, runner=ProgramExecutor(moved, g, backend))
        for _ in range(3):
            tr.step()
        state = tr.state
    finally:
        backend.close()
    bad = [g.tensors[t].name for t, x in ref.state.items() if not np.array_equal(x, state[t])]
    assert not bad, bad[:3]
    # the plan file keeps the page table
    again = Program.from_dict(moved.to_dict())
    assert again.to_dict()["format"] == "swapengine.program/3"
    assert np.array_equal(again.arena.mappings, moved.arena.mappings)


def test_the_verifier_rejects_two_live_tensors_in_one_physical_chunk(tight):
    g, program = tight
    moved = on_scattered_chunks(program)
    residents = sorted(set(moved.initial_resident.values()))
    assert len(residents) >= 2
    o1, o2 = residents[:2]
    arena = moved.arena
    assert arena.object_offset[o1] != arena.object_offset[o2]
    # point o2's first chunk at o1's first physical chunk: different virtual ranges, one chunk
    rows = arena.mappings.copy()
    target = arena.physical_extents(o1)[0][0]
    v2 = int(arena.object_offset[o2])
    row = int(np.flatnonzero((rows[:, 0] <= v2) & (v2 < rows[:, 0] + rows[:, 2]))[0])
    rows[row, 1] = target - (v2 - rows[row, 0])
    broken = dataclasses.replace(moved, arena=dataclasses.replace(arena, mappings=rows))
    assert o2 in sharing_objects(broken.arena)[o1]
    with pytest.raises(VerificationError, match="shares bytes"):
        verify(broken, g)
