import json

import numpy as np
import pytest

from engine.program import COMPUTE, FORMAT, Arena, Program, ProgramFormatError


def test_json_round_trip_keeps_every_field(tight_program):
    p, _ = tight_program
    q = Program.from_dict(json.loads(json.dumps(p.to_dict())))
    assert q.to_dict() == p.to_dict()
    assert q.count(COMPUTE) == len(p.schedule)
    assert q.arena.scratch_bytes == p.arena.scratch_bytes > 0
    assert q.arena.allocator == p.arena.allocator and q.arena.allocator["name"] == "size_classes"
    assert q.arena.object_offset.dtype == q.arena.object_bytes.dtype == np.int64
    assert q.graph_fingerprint == p.graph_fingerprint != ""


def test_the_json_form_is_version_2_with_an_arena(tight_program):
    p, _ = tight_program
    d = p.to_dict()
    assert d["format"] == FORMAT == "swapengine.program/2"
    assert "pool" not in d
    assert set(d["arena"]) == {"object_offset", "object_bytes", "arena_bytes", "scratch_bytes", "allocator"}
    a = p.arena
    assert d["arena"]["object_offset"] == a.object_offset.tolist()
    assert (d["arena"]["arena_bytes"], d["arena"]["scratch_bytes"]) == (a.arena_bytes, a.scratch_bytes)
    assert a.scratch_offset == a.arena_bytes - a.scratch_bytes >= int((a.object_offset + a.object_bytes).max())
    # the allocator's record is for people: a Program without one reads back the same
    del d["arena"]["allocator"]
    assert Program.from_dict(d).arena.allocator == {}
    # a version 1 file (a "pool") is refused, not misread
    old = p.to_dict()
    old["format"] = "swapengine.program/1"
    with pytest.raises(ProgramFormatError, match="expected format 'swapengine.program/2'"):
        Program.from_dict(old)


def test_arena_of_a_layout_puts_scratch_after_the_objects():
    from allocator import Allocation, SizeClassLayout
    alloc = Allocation([100, 1000], [0, 1], [2, 1])
    arena = Arena.of(SizeClassLayout.from_allocation(alloc), 512)
    assert arena.object_offset.tolist() == [0, 256, 512] and arena.object_bytes.tolist() == [256, 256, 1024]
    assert (arena.arena_bytes, arena.scratch_bytes, arena.scratch_offset, arena.num_objects) == (2048, 512, 1536, 3)
    assert arena.allocator == {"name": "size_classes", **alloc.to_dict()}


def test_malformed_descriptions_are_one_line_errors(tight_program):
    with pytest.raises(ProgramFormatError, match="not a swapengine program"):
        Program.from_dict({"format": "other"})
    d = tight_program[0].to_dict()
    del d["arena"]["object_bytes"]
    with pytest.raises(ProgramFormatError, match="malformed program description"):
        Program.from_dict(d)
    d = tight_program[0].to_dict()
    d["arena"]["object_bytes"] = d["arena"]["object_bytes"][:-1]
    with pytest.raises(ProgramFormatError, match="object_offset and object_bytes must be flat lists of one length"):
        Program.from_dict(d)
    d = tight_program[0].to_dict()
    d["instructions"][0]["kind"] = "teleport"
    with pytest.raises(ProgramFormatError, match="malformed"):
        Program.from_dict(d)


@pytest.mark.parametrize("where,value,match", [
    (("arena", "arena_bytes"), float("inf"), r"'arena_bytes' must be an integer from 0 to 2\*\*63 - 1, got inf"),
    (("arena", "scratch_bytes"), 2.5, r"'scratch_bytes' must be an integer"),
    (("arena", "object_offset", 0), 2**70, r"'object_offset' must be .*, got 1180591620717411303424"),
    (("arena", "object_bytes", 0), -1, r"'object_bytes' must be an integer from 0"),
    (("instructions", 0, "deps"), [2**64], r"'deps' must be an integer"),
    (("schedule", 0), True, r"'schedule' must be an integer"),
    (("instructions", 0, "copy"), "no", r"'copy' must be true or false, got 'no'"),      # defect 3: was True
    (("instructions", 0, "copy"), 0, r"'copy' must be true or false, got 0"),
])
def test_numbers_out_of_range_are_one_line_errors(tight_program, where, value, match):
    """Issue 39, defect 2: an infinite arena was an OverflowError, an offset of 2**70 too."""
    d = json.loads(json.dumps(tight_program[0].to_dict()))
    at = d
    for key in where[:-1]:
        at = at[key]
    at[where[-1]] = value
    d = json.loads(json.dumps(d))             # as the file would hold it (inf: Infinity)
    with pytest.raises(ProgramFormatError, match=match) as e:
        Program.from_dict(d)
    assert "\n" not in str(e.value)
