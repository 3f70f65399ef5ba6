"""Model, budget and plan choices of `python -m engine.train` (engine/train_plan.py)."""
import json

import pytest

from engine.liveness import peak_bytes
from engine.train_args import UsageError, parser
from engine.train_plan import batch_of, build_model, choose_budget, load_plan
from planner.allocation import size_demand, smallest_budget
from planner.baselines import make_program
from planner.swap_planner import PlanError

LSTM = ["--model", "small-lstm", "--batch", "4", "--size", "3"]


def test_build_model_takes_batch_size_and_dtype_and_names_a_bad_model():
    g = build_model(parser().parse_args(LSTM + ["--dtype", "float64"]))
    assert batch_of(g) == 4 and g.tensors[g.loss].dtype.name == "float64"
    with pytest.raises(UsageError, match="^--model wresnet-7-1: "):
        build_model(parser().parse_args(["--model", "wresnet-7-1"]))


def test_default_budget_is_three_tenths_of_the_peak_or_the_smallest_that_runs():
    g = build_model(parser().parse_args(LSTM))
    peak, smallest = peak_bytes(g), smallest_budget(size_demand(g, g.default_order()))
    assert choose_budget(parser().parse_args(LSTM), g, peak) == max(smallest, int(0.3 * peak))
    assert choose_budget(parser().parse_args(LSTM + ["--memory", "1MiB"]), g, peak) == 1 << 20
    with pytest.raises(PlanError, match="the smallest budget that runs this model is"):
        choose_budget(parser().parse_args(LSTM + ["--memory", "1KiB"]), g, peak)


def test_a_plan_file_must_be_json_of_this_graph(tmp_path):
    g = build_model(parser().parse_args(LSTM))
    other = build_model(parser().parse_args(["--model", "small-lstm", "--batch", "2", "--size", "3"]))
    good, foreign, broken = tmp_path / "good.json", tmp_path / "foreign.json", tmp_path / "broken.json"
    good.write_text(json.dumps(make_program("ideal", g, None).to_dict()))
    foreign.write_text(json.dumps(make_program("ideal", other, None).to_dict()))
    broken.write_text("{")
    assert load_plan(str(good), g).graph_fingerprint == g.fingerprint()
    with pytest.raises(UsageError, match="was made for another graph"):
        load_plan(str(foreign), g)
    with pytest.raises(UsageError, match="is not valid JSON"):
        load_plan(str(broken), g)
    with pytest.raises(UsageError, match="does not exist"):
        load_plan(str(tmp_path / "none.json"), g)
