"""The verifier on a page table (paper 001's va): rows checked, objects' physical extents
compared, and a plan file's page table validated before anything maps it."""
import dataclasses

import numpy as np
import pytest

import zoo
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT, Arena, Instr, Program, ProgramFormatError, sharing_objects
from planner.facts import GraphFacts
from planner.policy import plan_with
from planner.verify import VerificationError, verify

from tests.engine.backends.test_cpu_virtual import CHUNK, on_scattered_chunks


@pytest.fixture(scope="module")
def moved():
    g = zoo.tiny("rnn")
    program = on_scattered_chunks(plan_with("odswap", g, GraphFacts(g).smallest_budget * 2))
    verify(program, g)
    return g, program


def with_rows(program: Program, rows) -> Program:
    return dataclasses.replace(program, arena=dataclasses.replace(program.arena, mappings=np.asarray(rows)))


def test_objects_on_distinct_chunks_share_nothing_and_extents_follow_the_rows():
    arena = Arena(np.array([0, 2 * CHUNK]), np.array([2 * CHUNK, CHUNK]), 4 * CHUNK, 0, {},
                  np.array([[0, 3 * CHUNK, CHUNK], [CHUNK, 0, CHUNK], [2 * CHUNK, CHUNK, CHUNK],
                            [5 * CHUNK, 0, CHUNK]]), 6 * CHUNK)
    assert arena.physical_extents(0) == [(3 * CHUNK, CHUNK), (0, CHUNK)]
    assert arena.physical_extents(1) == [(CHUNK, CHUNK)]
    assert sharing_objects(arena) == [[], []]
    arena.object_offset = np.array([0, 5 * CHUNK])              # object 1 now maps chunk 0 too
    assert sharing_objects(arena) == [[1], [0]]


def row_of_object_0(arena) -> int:
    v, rows = int(arena.object_offset[0]), arena.mappings
    return int(np.flatnonzero((rows[:, 0] <= v) & (v < rows[:, 0] + rows[:, 2]))[0])


@pytest.mark.parametrize("change,message", [
    (lambda r, i: np.vstack([r, r[i:i + 1]]), "two page-table rows map one virtual byte"),
    (lambda r, i: np.delete(r, i, axis=0), "leaves byte .* of object 0's virtual range is not mapped"),
    (lambda r, i: r + np.array([0, 10**12, 0]), "outside physical memory"),
])
def test_a_broken_page_table_is_refused(moved, change, message):
    g, program = moved
    rows = change(program.arena.mappings.copy(), row_of_object_0(program.arena))
    with pytest.raises(VerificationError, match=message):
        verify(with_rows(program, rows), g)


def test_a_plan_file_with_a_malformed_page_table_is_one_line():
    g = zoo.tiny("rnn")
    d = on_scattered_chunks(plan_with("odswap", g, GraphFacts(g).smallest_budget * 2)).to_dict()
    assert d["format"] == "swapengine.program/3"
    d["arena"]["mappings"] = [[0, 1]]
    with pytest.raises(ProgramFormatError, match="malformed program description"):
        Program.from_dict(d)
    del d["arena"]["mappings"]
    with pytest.raises(ProgramFormatError, match="malformed program description"):
        Program.from_dict(d)


BIG = 1 << 62


def test_an_object_past_the_arena_by_int64_wraparound_is_refused(moved):
    """offset 2**62 + bytes 2**62 wraps int64 to a negative end: the sum may not decide (issue 39)."""
    g, _ = moved
    program = plan_with("odswap", g, GraphFacts(g).smallest_budget * 2)
    arena = program.arena
    offsets, sizes = arena.object_offset.copy(), arena.object_bytes.copy()
    offsets[0], sizes[0] = BIG, BIG
    broken = dataclasses.replace(program, arena=dataclasses.replace(arena, object_offset=offsets, object_bytes=sizes))
    with pytest.raises(VerificationError, match="outside the arena"):
        verify(broken, g)


@pytest.mark.parametrize("column", [0, 1])
def test_a_page_table_row_past_its_space_by_int64_wraparound_is_refused(moved, column):
    g, program = moved
    rows = program.arena.mappings.copy()
    rows[0, column] = (1 << 63) - 4096         # virtual or physical offset; + its bytes wraps
    with pytest.raises(VerificationError, match="outside physical memory"):
        verify(with_rows(program, rows), g)


# ---------------------------------------------------------------- a chunk two objects map
KIB = 1024


def on_one_chunk(swap_in_y_after):
    """x (1 KiB) swapped into object 0; a = relu(x) into object 2; x's copy dropped (a read of
    object 0 on the swap-out stream); y swapped into object 1, whose virtual range maps the very
    chunk object 0 maps, after ``swap_in_y_after``; out = add(a, y) into object 3."""
    from tests.planner.test_verify import two_input_graph
    g = two_input_graph()
    rows = np.array([[0, 0, KIB], [KIB, 0, KIB], [2 * KIB, KIB, KIB], [3 * KIB, 2 * KIB, KIB]])
    arena = Arena(np.arange(4) * KIB, np.full(4, KIB), 3 * KIB, 0, {"name": "test"}, rows, 4 * KIB)
    instrs = [Instr(SWAP_IN, 0, 0), Instr(COMPUTE, 0, objects=(0, 2), deps=[0]),
              Instr(SWAP_OUT, 0, 0, copy=False, deps=[0]), Instr(SWAP_IN, 1, 1, deps=list(swap_in_y_after)),
              Instr(COMPUTE, 1, objects=(2, 1, 3), deps=[3])]
    return g, Program(g.name, [0, 1], arena, instrs, {})


def test_a_write_into_a_chunk_must_follow_every_read_of_its_earlier_tenant_on_every_stream():
    g, program = on_one_chunk(swap_in_y_after=[1, 2])
    verify(program, g)
    # ordered after the compute that read x but not after the swap-out that read it too: the
    # swap-in may overwrite the chunk while the swap-out still reads x there
    g, program = on_one_chunk(swap_in_y_after=[1])
    with pytest.raises(VerificationError, match=r"instruction 3 \(swap_in 'y'\) may overwrite object 1, which shares "
                                                r"bytes with object 0, while instruction 2 \(swap_out 'x'\) still "
                                                r"uses 'x' there: no edge orders them"):
        verify(program, g)
    g, program = on_one_chunk(swap_in_y_after=[2])
    with pytest.raises(VerificationError, match=r"while instruction 1 \(compute 'a'\) still uses 'x'"):
        verify(program, g)
