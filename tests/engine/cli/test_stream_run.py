"""python -m engine.stream_train: a short checked run and one-line refusals."""
import re

import pytest

from engine.cli.stream_run import main


@pytest.mark.filterwarnings("error::RuntimeWarning")      # numpy's own warning must not escape (issue 39)
def test_short_run_with_check_says_identical(capsys):
    rc = main(["--varying-seq", "8,16", "--eval-every", "6", "--accumulate", "2", "--nonfinite-at", "3",
               "--iterations", "12", "--sanitize", "--check"])
    out, err = capsys.readouterr()
    assert rc == 0 and "parameters identical to the unlimited run: yes" in out
    assert "skipped 1" in out and "plan cache" in out and "monitor:" in out
    # the forced step is our one line, not numpy's RuntimeWarning with a source path
    assert "iteration 4: loss forced non-finite (--nonfinite-at 3); its accumulation window's update is skipped" in out
    assert "RuntimeWarning" not in out + err and ".py:" not in out + err
    # the budget in binary units, as every other size the tools print
    assert re.search(r"; budget [0-9.]+ KiB \(largest unlimited peak [0-9.]+ KiB\)", out), out.splitlines()[0]
    assert_printed_stages_are_those_the_iterations_ran_in(out)


def test_an_evaluation_prints_the_stage_it_ran_in_not_the_warm_up_it_causes(capsys):
    assert main(["--eval-every", "8", "--iterations", "16"]) == 0
    out = capsys.readouterr().out
    # the evaluation ran in GenPolicy (its observation resets the machine to WarmUp after it)
    assert re.search(r"^iteration 8 \(evaluation\): loss [0-9.]+, stage GenPolicy$", out, re.M), out
    assert_printed_stages_are_those_the_iterations_ran_in(out)


def assert_printed_stages_are_those_the_iterations_ran_in(out: str) -> None:
    """A progress line's stage is the one its iteration ran in: the last change of stage the
    monitor made before it (an evaluation used to print the WarmUp its own observation had just
    reset to, so every 100th line said WarmUp: issue 39)."""
    changes = [(int(i), stage) for i, stage in
               re.findall(r"(\d+):(\w+)", out.split("stages: ")[1].splitlines()[0])]
    printed = re.findall(r"^iteration (\d+)( \(evaluation\))?: loss [-0-9.]+, stage (\w+)$", out, re.M)
    assert printed and any(evaluation for _, evaluation, _ in printed)
    for number, _, stage in printed:
        ran_in = [s for i, s in changes if i < int(number) - 1]
        assert stage == (ran_in[-1] if ran_in else "WarmUp"), (number, stage, changes)


@pytest.mark.parametrize("argv, says", [
    (["--model", "wresnet-50-1", "--varying-seq", "8"], "needs a model with a sequence length"),
    (["--varying-seq", "8;12"], "separated by commas"),
    (["--nonfinite-at", "x"], "iteration numbers"),
    (["--model", "nope"], "unknown model"),
    (["--policy", "ideal"], "plans no swapping"),
    (["--accumulate", "0"], "must be positive"),
    (["--nonfinite-at", "-1"], "--nonfinite-at -1: iterations are numbered from 0 to 0 (--iterations 1)"),
    (["--nonfinite-at", "0,5"], "--nonfinite-at 5: iterations are numbered from 0 to 0 (--iterations 1)"),
    (["--stages-plot", ""], "--stages-plot '': an empty name; give a name or leave --stages-plot out"),
])
def test_bad_input_is_one_line_exit_2(argv, says, capsys):
    assert main(argv + ["--iterations", "1"]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("where, says", [
    ("blocker/plot.png", r"--stages-plot .*blocker' is a file, not a directory"),
    ("locked/plot.png", r"--stages-plot .*cannot write in '.*locked'"),
    ("plot.xyz", r"--stages-plot .*plot.xyz: matplotlib cannot write '.xyz' files; use one of .*png"),
])
def test_a_stages_plot_that_cannot_be_written_is_refused_before_the_work(tmp_path, capsys, where, says):
    """Issue 39, defect 3: the plot was the run's last step, after the work."""
    import os
    import re
    if where.endswith(".xyz"):
        pytest.importorskip("matplotlib")
    (tmp_path / "blocker").write_text("")
    (tmp_path / "locked").mkdir()
    os.chmod(tmp_path / "locked", 0o500)
    if where.startswith("locked") and os.access(tmp_path / "locked", os.W_OK):
        pytest.skip("root writes into a read-only folder")
    try:
        assert main(["--stages-plot", str(tmp_path / where), "--iterations", "2"]) == 2
    finally:
        os.chmod(tmp_path / "locked", 0o700)
    out, err = capsys.readouterr()
    assert re.search(says, err) and len(err.strip().splitlines()) == 1, err
    assert "done in" not in out


def test_a_stages_plot_goes_into_a_new_folder(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    target = tmp_path / "new" / "stages.png"
    assert main(["--stages-plot", str(target), "--iterations", "2"]) == 0
    assert target.stat().st_size > 0
