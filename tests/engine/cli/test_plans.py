"""Model, budget and plan choices of `python -m engine.train` (engine/cli/plans.py)."""
import json

import pytest

from engine.cli.config import RunConfig
from engine.cli.flags import UsageError, parser
from engine.cli.plans import batch_of, build_model, choose_budget, load_plan
from engine.graph_io import fingerprint
from engine.liveness import peak_bytes
from planner.errors import PlanError
from planner.facts import GraphFacts
from planner.policy import unlimited_program

LSTM = ["--model", "small-lstm", "--batch", "4", "--size", "3"]


def config(argv) -> RunConfig:
    return RunConfig.from_args(parser().parse_args(argv))


def test_build_model_takes_batch_size_and_dtype_and_names_a_bad_model():
    g = build_model(config(LSTM + ["--dtype", "float64"]))
    assert batch_of(g) == 4 and g.tensors[g.loss].dtype.name == "float64"
    with pytest.raises(UsageError, match="^--model wresnet-7-1: "):
        build_model(config(["--model", "wresnet-7-1"]))


def test_default_budget_is_three_tenths_of_the_peak_or_the_smallest_that_runs():
    facts = GraphFacts(build_model(config(LSTM)))
    peak, smallest = peak_bytes(facts.graph), facts.smallest_budget
    budget = choose_budget(config(LSTM), facts)
    assert budget.device_bytes == max(smallest, int(0.3 * peak))
    assert budget.pool_bytes == budget.device_bytes - facts.scratch.bytes
    assert choose_budget(config(LSTM + ["--memory", "1MiB"]), facts).device_bytes == 1 << 20
    with pytest.raises(PlanError, match="the smallest budget that runs this model is"):
        choose_budget(config(LSTM + ["--memory", "1KiB"]), facts)


def test_a_plan_file_must_be_json_of_this_graph(tmp_path):
    g = build_model(config(LSTM))
    other = build_model(config(["--model", "small-lstm", "--batch", "2", "--size", "3"]))
    good, foreign, broken = tmp_path / "good.json", tmp_path / "foreign.json", tmp_path / "broken.json"
    good.write_text(json.dumps(unlimited_program(g).to_dict()))
    foreign.write_text(json.dumps(unlimited_program(other).to_dict()))
    broken.write_text("{")
    assert load_plan(str(good), g).graph_fingerprint == fingerprint(g)
    with pytest.raises(UsageError, match="was made for another graph"):
        load_plan(str(foreign), g)
    with pytest.raises(UsageError, match="is not valid JSON"):
        load_plan(str(broken), g)
    with pytest.raises(UsageError, match="does not exist"):
        load_plan(str(tmp_path / "none.json"), g)


def test_a_long_plan_says_it_is_still_planning_unless_another_report_covers_it(monkeypatch, capsys, tmp_path):
    """Planning and verifying one policy's Program past HEARTBEAT_S prints a line on stderr
    (lms on NasNet-25 plans for about a minute); a policy the budget ladder walks has the walk's
    own heartbeat instead, and --quiet prints neither."""
    import time

    from engine.cli import plans
    from engine.profile import analytic_profile

    real = plans.planning.verified

    def slow(*args, **kwargs):
        time.sleep(0.3)
        return real(*args, **kwargs)
    monkeypatch.setattr(plans.planning, "verified", slow)
    monkeypatch.setattr(plans, "HEARTBEAT_S", 0.05)
    for quiet in (False, True):
        cfg = config(LSTM + ["--policy", "window,capuchin"] + (["--quiet"] if quiet else []))
        facts = GraphFacts(build_model(cfg))
        plans.plan_policies(cfg, facts, choose_budget(cfg, facts), analytic_profile("v100"), str(tmp_path))
        err = capsys.readouterr().err.splitlines()
        still = {line.split(":")[0] for line in err if "still planning" in line}
        assert still == (set() if quiet else {"plan   window"})
