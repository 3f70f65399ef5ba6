"""The Programs the planner makes for the paper's five Table 1 models are the ones committed in
bench/results/program_hashes.json, and the online policies' in online_program_hashes.json (a
refactoring must change no plan)."""
import json

import pytest

from bench.program_hashes import ONLINE_POLICIES, ONLINE_RESULTS, RESULTS, digests, online_digests, program_digest


@pytest.mark.slow
def test_table1_programs_hash_as_committed():
    with open(RESULTS) as f:
        assert digests() == json.load(f)


@pytest.mark.slow
def test_online_policies_programs_hash_as_committed():
    with open(ONLINE_RESULTS) as f:
        committed = json.load(f)
    now = online_digests()
    assert now == committed
    planned = {p for row in now.values() for p, d in row.items() if not d.startswith("refused")}
    assert planned == set(ONLINE_POLICIES)          # every online policy plans somewhere


def test_the_digest_sees_a_changed_byte_range(lstm_graph):
    from planner.policy import unlimited_program
    program = unlimited_program(lstm_graph)
    before = program_digest(program)
    moved = program.arena.object_offset.copy()
    moved[0] += 256
    program.arena.object_offset = moved
    assert program_digest(program) != before
