"""The Python facade (engine/api.py) and the example CI runs (docs/examples/plan_and_train.py)."""
import runpy
from pathlib import Path

import pytest

from engine import api as se

ROOT = Path(__file__).resolve().parents[2]


def test_the_example_runs_and_every_plan_is_bit_identical(capsys):
    runpy.run_path(str(ROOT / "docs" / "examples" / "plan_and_train.py"))["main"](iterations=2)
    out = capsys.readouterr().out
    assert out.count("identical: True") == 3


def test_a_plan_is_verified_simulated_and_within_its_budget():
    g = se.model("small-lstm", batch=4, size=3)
    p = se.plan(g, "odswap", memory="16KiB", profile="v100")
    assert p.budget.device_bytes == 16 * 1024 and p.program.arena.arena_bytes <= 16 * 1024
    assert p.seconds > 0 and p.h2d_bytes > 0
    assert {"ideal", "odswap", "swapadvisor"} <= set(se.policies())


def test_without_memory_an_online_allocators_policy_gets_the_least_budget_it_plans_at():
    g = se.model("small-cnn")       # at 0.3 of its peak best fit fragments too much for window
    p = se.plan(g, "window", profile="v100")
    with pytest.raises(se.EngineError, match="cannot place"):
        se.plan(g, "window", memory=int(0.95 * p.budget.device_bytes), profile="v100")
    pool = se.plan(g, "swapadvisor", profile="v100")      # the pool's least is exact: 0.3 of the peak
    assert pool.budget.device_bytes < p.budget.device_bytes


@pytest.mark.parametrize("call,message", [
    (lambda g: se.plan(g, "magic"), "unknown policy 'magic'"),
    (lambda g: se.plan(g, "reference"), "runs no Program"),
    (lambda g: se.plan(g, "odswap", memory="1KiB"), "the smallest budget that runs"),
    (lambda g: se.plan(g, "odswap", profile="tpu9"), "does not exist"),
    (lambda g: se.model("alexnet"), "small-cnn, small-lstm"),
])
def test_bad_input_raises_one_line_engine_errors(call, message):
    g = se.model("small-lstm", batch=4, size=3)
    with pytest.raises(se.EngineError, match=message) as e:
        call(g)
    assert "\n" not in str(e.value)
