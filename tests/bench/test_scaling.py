"""bench.scaling's quick mode: one ladder, two policies, the table's shape (not its timings)."""
import pytest

from bench import scaling


def test_the_quick_table_has_a_row_per_rung_and_policy_and_an_exponent_per_policy(capsys):
    assert scaling.main(["--quick", "--ladders", "gpt", "--policies", "swapadvisor,swapadvisor-va",
                         "--cap-seconds", "120"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("ladder"))
    assert lines[header].split() == ["ladder", "model", "operators", "policy", *scaling.STAGES]
    rows = [line.split() for line in lines[header + 2:] if line.strip()]
    measured = [r for r in rows if r[1] != "exponent"]
    rungs = [model for model, _ in scaling.QUICK["gpt"]]
    assert [(r[1], r[3]) for r in measured] == [(m, p) for m in rungs for p in ("swapadvisor", "swapadvisor-va")]
    ops = [int(r[2]) for r in measured[::2]]
    assert ops[0] < ops[1]                          # the ladder grows
    first, second = measured[0], measured[1]
    assert len(first) == 4 + len(scaling.STAGES)    # the first policy's row has build and autodiff
    assert len(second) == 4 + len(scaling.STAGES) - 2
    for value in first[4:] + second[4:]:
        float(value)                                # every stage finished well inside the cap
    exponents = [r for r in rows if r[1] == "exponent"]
    assert [r[2] for r in exponents] == ["swapadvisor", "swapadvisor-va"]   # (operators left empty)
    assert len(exponents[0]) == 3 + len(scaling.STAGES)


def test_the_exponent_is_the_log_log_slope():
    assert scaling.exponent([(100, 0.5), (400, 4.0)]) == pytest.approx(1.5)


def test_the_exponent_leaves_out_rungs_too_short_to_time():
    assert scaling.exponent([(100, 0.0002), (200, 0.01), (400, 0.04)]) == pytest.approx(2.0)
    assert scaling.exponent([(100, 0.0002), (200, 0.001), (400, 0.04)]) is None
    assert scaling.exponent([(100, 0.5)]) is None


def test_every_rung_swaps_whatever_places_its_tensors():
    """The budget lies below what the allocator needs with nothing swapped: for an allocator
    that puts a tensor anywhere, under the live bytes at the peak (the size-class pool's
    unlimited allocation, the yardstick before, put gpt-2-1024-16's at 1.19 times that peak:
    bestfit's policies swapped nothing there)."""
    import zoo
    from planner.allocation import unlimited_allocation
    from planner.budget import smallest_budget
    from planner.facts import GraphFacts

    facts = GraphFacts(zoo.build("gpt-2-1024-16", batch=8))
    peak = facts.peak_bytes + facts.scratch.bytes
    unlimited = unlimited_allocation(facts).pool_bytes + facts.scratch.bytes
    assert scaling.budget_at(facts, 0.75) > peak                  # the pool's yardstick leaves room for all
    for online in ("bestfit", "va"):
        assert smallest_budget(facts, [online]) < scaling.budget_at(facts, 0.75, online) < peak
    assert facts.smallest_budget < scaling.budget_at(facts, 0.75, "pool") == scaling.budget_at(facts, 0.75) < unlimited


def test_repeated_runs_keep_each_stage_least_and_a_cap_or_refusal_as_the_first_run_had_it():
    first = {"operators": 9, "build": 0.2, "autodiff": 0.1, "plan": scaling.CAPPED, "verify": 0.3, "simulate": "-"}
    again = {"operators": 9, "build": 0.1, "autodiff": 0.3, "plan": 1.5, "verify": 0.25, "simulate": "-"}
    assert scaling.least_of_runs([first, again]) == {"operators": 9, "build": 0.1, "autodiff": 0.1,
                                                     "plan": scaling.CAPPED, "verify": 0.25, "simulate": "-"}


def test_an_unknown_ladder_is_one_line(capsys):
    assert scaling.main(["--quick", "--ladders", "alexnet"]) == 2
    assert "unknown ladder or policy alexnet" in capsys.readouterr().err


def test_models_given_are_one_ladder_without_an_exponent(capsys):
    assert scaling.main(["--models", "rnn-1-1k:4,gpt-1-64-2:2", "--policies", "swapadvisor",
                         "--cap-seconds", "120"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("ladder"))
    rows = [line.split() for line in lines[header + 2:] if line.strip()]
    assert [(r[0], r[1], r[3]) for r in rows] == [("models", "rnn-1-1k", "swapadvisor"),
                                                  ("models", "gpt-1-64-2", "swapadvisor")]
    assert scaling.main(["--models", "rnn-1-1k"]) == 2
    assert "--models wants MODEL:BATCH" in capsys.readouterr().err


def test_repeats_run_the_ladder_in_rounds_and_a_capped_cell_is_not_run_again(monkeypatch):
    """Each round runs every (rung, policy) once, so a slow spell slows one run of a cell, not
    all of its runs; a policy capped on a rung is not run on the rungs above, nor again."""
    calls = []
    slow = {("b", "lms", 0): 2.0}          # round 0 of rung b under lms ran in a slow spell

    def fake_run(model, batch, column, cap_seconds, cap_mib, position, env):
        round_no = sum(1 for m, c in calls if (m, c) == (model, column))
        calls.append((model, column))
        if (model, column) == ("b", "window"):
            return {"operators": 20, **{s: scaling.CAPPED for s in scaling.STAGES}}
        seconds = (0.1 if model == "a" else 0.4) * slow.get((model, column, round_no), 1.0)
        return {"operators": 10 if model == "a" else 20, **{s: seconds for s in scaling.STAGES}}
    monkeypatch.setattr(scaling, "run_one", fake_run)
    rows = scaling.ladder_table("l", [("a", 1), ("b", 1), ("c", 1)], ["lms", "window"], 60, 4000, 0.75, {},
                                lambda line: None, repeats=2)
    first_round = [("a", "lms"), ("a", "window"), ("b", "lms"), ("b", "window"), ("c", "lms")]
    assert calls == first_round + [("a", "lms"), ("a", "window"), ("b", "lms"), ("c", "lms")]
    plan = {(r[1], r[3]): r[4 + scaling.STAGES.index("plan")] for r in rows}
    assert plan[("b", "lms")] == "0.400"                    # the slow round's 0.800 not kept
    assert plan[("b", "window")] == plan[("c", "window")] == scaling.CAPPED
