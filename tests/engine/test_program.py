import json

import pytest

from engine.program import COMPUTE, Program, ProgramFormatError


def test_json_round_trip_keeps_every_field(tight_program):
    p, _ = tight_program
    q = Program.from_dict(json.loads(json.dumps(p.to_dict())))
    assert q.to_dict() == p.to_dict()
    assert q.count(COMPUTE) == len(p.schedule)
    assert q.pool.scratch_bytes == p.pool.scratch_bytes > 0


def test_malformed_descriptions_are_one_line_errors(tight_program):
    with pytest.raises(ProgramFormatError, match="not a swapengine program"):
        Program.from_dict({"format": "other"})
    d = tight_program[0].to_dict()
    del d["pool"]["cnt"]
    with pytest.raises(ProgramFormatError, match="malformed program description"):
        Program.from_dict(d)
    d = tight_program[0].to_dict()
    d["instructions"][0]["kind"] = "teleport"
    with pytest.raises(ProgramFormatError, match="malformed"):
        Program.from_dict(d)
