"""python -m engine.stream_train: a short checked run and one-line refusals."""
import pytest

from engine.cli.stream_run import main


@pytest.mark.filterwarnings("ignore::RuntimeWarning")     # the forced non-finite step
def test_short_run_with_check_says_identical(capsys):
    rc = main(["--varying-seq", "8,16", "--eval-every", "6", "--accumulate", "2", "--nonfinite-at", "3",
               "--iterations", "12", "--sanitize", "--check"])
    out = capsys.readouterr().out
    assert rc == 0 and "parameters identical to the unlimited run: yes" in out
    assert "skipped 1" in out and "plan cache" in out and "monitor:" in out


@pytest.mark.parametrize("argv, says", [
    (["--model", "wresnet-50-1", "--varying-seq", "8"], "needs a model with a sequence length"),
    (["--varying-seq", "8;12"], "separated by commas"),
    (["--nonfinite-at", "x"], "iteration numbers"),
    (["--model", "nope"], "unknown model"),
    (["--policy", "ideal"], "plans no swapping"),
    (["--accumulate", "0"], "must be positive"),
])
def test_bad_input_is_one_line_exit_2(argv, says, capsys):
    assert main(argv + ["--iterations", "1"]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
