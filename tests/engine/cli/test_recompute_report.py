"""A plan with recomputations through `engine.train`: a policy registered here returns the
unlimited Program with two outputs recreated by recomputation (tests/planner/recompute_programs.py);
the run verifies, simulates and trains it bit-identically on the sanitizing cpu backend, says
how many recomputations it plans, prints one line for them under the table, and --json carries
them in the row's stalls, valid against the schema. A run without such a plan prints none."""
import json

import pytest

from engine.train import main
from planner import policy
from planner.policy import unlimited_program
from tests.engine.cli.test_report_json import valid
from tests.planner.recompute_programs import recomputing_program

TINY_LSTM = ["--model", "small-lstm", "--batch", "4", "--size", "3", "--quiet", "--backend", "cpu",
             "--memory", "64MiB", "--profile", "v100"]
RECOMPUTATIONS = 2


def recomputing(request: policy.PlanRequest):
    p = recomputing_program(unlimited_program(request.graph, request.facts), request.graph, RECOMPUTATIONS)
    p.policy = "recomputing"
    return p


@pytest.fixture
def recomputing_policy():
    policy.register(policy.Policy("recomputing", "the unlimited plan with recomputations (a test policy)",
                                  recomputing))
    yield
    policy.unregister("recomputing")


def test_a_plan_with_recomputations_is_reported_and_trains_bit_identically(recomputing_policy, tmp_path, capsys):
    report = tmp_path / "r.json"
    assert main(TINY_LSTM + ["--policy", "ideal,recomputing", "--iterations", "3", "--measure-iterations", "1",
                             "--sanitize", "--json", str(report), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    plan_lines = {ln.split()[1]: ln for ln in out.splitlines() if ln.startswith("plan ")}
    assert f"{RECOMPUTATIONS} recomputations" in plan_lines["recomputing"]
    assert "recomputations" not in plan_lines["ideal"]
    notes = [ln for ln in out.splitlines() if "recomputations," in ln]
    assert len(notes) == 1 and notes[0].startswith(f"recomputing: {RECOMPUTATIONS} recomputations, ")
    assert "not swapped out and back" in notes[0]
    assert "parameters identical to the unlimited run: yes (bit for bit)" in out
    r = valid(json.loads(report.read_text()))
    rows = {p["policy"]: p for p in r["policies"]}
    stalls = rows["recomputing"]["stalls"]
    assert stalls["recomputes"] == RECOMPUTATIONS and stalls["recompute_s"] > 0 and stalls["recomputed_bytes"] > 0
    assert (rows["ideal"]["stalls"]["recomputes"], rows["ideal"]["stalls"]["recomputed_bytes"]) == (0, 0)
    assert r["identical"] is True


def test_a_run_without_recomputations_prints_none(tmp_path, capsys):
    assert main(TINY_LSTM + ["--policy", "ideal,swapadvisor", "--simulate-only", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # The search line names the chosen `recompute` knob; only the plan line and the note count them.
    assert "recomputations" not in out
    assert not any(ln.startswith("plan ") and "recompute" in ln for ln in out.splitlines())
