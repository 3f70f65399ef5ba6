"""bench/hostile_inputs.py, issue 39's acceptance harness: its list covers the four commands and
the files they read, and its runner tells each outcome apart (the harness itself runs for
minutes: python -m bench.hostile_inputs)."""
from pathlib import Path

from bench import hostile_inputs as h


def test_the_list_has_150_cases_or_more_across_the_four_commands():
    cases = h.all_cases()
    assert len(cases) >= 150
    assert len({c.name for c in cases}) == len(cases)
    assert {h.MODULE[c.command] for c in cases} == {"engine.train", "engine.infer", "engine.serve",
                                                    "engine.stream_train"}
    assert {c.expect for c in cases} == {h.REFUSED, h.ACCEPTED}
    for flag in ("--load-plan", "--profile", "--resume", "--config", "--data", "--search-checkpoint", "--model"):
        assert any(flag in c.args and c.make for c in cases), flag       # a hostile file for each input


def _run(case, tmp_path):
    fix = tmp_path / "fix"
    fix.mkdir(exist_ok=True)
    return h.run_case(case, fix, tmp_path, len(list(tmp_path.iterdir())))


def test_the_runner_tells_a_one_line_refusal_from_a_silent_acceptance(tmp_path: Path):
    refused = h.Case("bad batch", "sim", ("--batch", "0"))
    assert _run(refused, tmp_path).outcome == "ok"
    wrong = h.Case("a good batch expected refused", "sim", ("--batch", "2"))
    assert _run(wrong, tmp_path).outcome == "silent acceptance"
    unsaid = h.Case("accepted but a warning is wanted", "sim", ("--batch", "2"), h.ACCEPTED, says="^warning: never")
    assert _run(unsaid, tmp_path).outcome == "silent acceptance"


def test_the_runner_calls_a_case_past_its_limit_a_hang(tmp_path: Path):
    slow = h.Case("a search of a minute", "sim", ("--search-seconds", "60", "--workers", "1"), h.ACCEPTED, timeout=3)
    assert _run(slow, tmp_path).outcome == "hang"
