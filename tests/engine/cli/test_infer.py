"""Inference under memory budgets (engine.infer): outputs bit-identical to the unlimited run
with the sanitizer at several budgets, and bad input in one line."""
import numpy as np
import pytest

from engine.backend_registry import choose
from engine.cli import infer
from engine.cli.flags import UsageError
from planner.facts import GraphFacts
from zoo.resnet import resnet


def small_resnet():
    return resnet(blocks=(1, 1, 1, 1), batch=2, size=32, classes=10, base_width=8)


def test_outputs_bit_identical_at_every_budget_with_the_sanitizer():
    g = small_resnet()
    facts = GraphFacts(g)
    placement = choose("cpu")
    reference = infer.unlimited_outputs(g, placement, batches=2)
    assert reference[0] and not np.array_equal(*[r[g.outputs[0]] for r in reference])   # batches differ
    ran = 0
    for fraction in (0.0, 0.4, 0.7, 1.2):
        budget = max(facts.smallest_budget, int(fraction * facts.peak_bytes))
        planned = infer.plan_inference(g, budget, profile="v100")
        assert planned.plan is not None, planned.why
        run, backend = infer.executor_run(g, planned.plan.program, placement, sanitize=True, seed=0)
        try:
            outs = [run.batch() for _ in range(2)]
        finally:
            backend.close()
        assert infer.same_outputs(outs, reference), budget
        ran += 1
    assert ran == 4


def test_a_budget_too_small_is_reported_not_raised():
    g = small_resnet()
    planned = infer.plan_inference(g, 1024)
    assert planned.plan is None and "budget" in planned.why.lower()


def test_training_model_refused_in_one_line():
    with pytest.raises(UsageError, match="forward-only"):
        infer.forward_graph("small-cnn")


@pytest.mark.parametrize("spec,match", [("64", "no unit"), ("x%", "not a number"), ("-5%", "above 0"),
                                        ("12furlongs", "--memory")])
def test_bad_budget_one_line(spec, match):
    with pytest.raises(UsageError, match=match):
        infer.budget_bytes(spec, 1000)


def test_budget_as_percentage_of_peak():
    assert infer.budget_bytes("50%", 1000) == 500
    assert infer.budget_bytes("2KiB", 1000) == 2048


def test_main_prints_one_line_on_bad_model(capsys):
    assert infer.main(["--model", "wresnet-152-10", "--simulate-only"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "forward-only" in err[0]


def test_simulate_only_reports_each_budget_against_its_lower_bound(capsys):
    """One line per budget with its distance from the lower bound: never under it (the bounds
    hold for forward-only plans too)."""
    import re

    assert infer.main(["--model", "resnet-26", "--size", "64", "--memory", "25%,50%,100%", "--simulate-only"]) == 0
    out = capsys.readouterr().out
    ratios = [float(x) for x in re.findall(r"(\d+\.\d+)x its lower bound", out)]
    assert len(ratios) == 3 and all(r >= 1.0 for r in ratios), out
    swapping = [float(x) for x in re.findall(r"(\d+\.\d+)x swapping only", out)]     # these plans only swap
    assert len(swapping) == 3 and all(1.0 <= s <= r for s, r in zip(swapping, ratios)), out


@pytest.mark.parametrize("value", ["nan", "-1", "inf"])
def test_search_seconds_must_be_a_finite_number_from_zero(capsys, value):
    """Issue 39, defect 2: nan was a traceback from the search, -1 silently no search."""
    argv = ["--model", "resnet-14", "--size", "64", "--simulate-only", "--memory", "50%", "--search-seconds", value]
    assert infer.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--search-seconds: must be a non-negative number" in err[0], err
