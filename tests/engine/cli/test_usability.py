"""What a new user stumbled on (issue 15): --version, no abbreviations, grouped --help with
defaults, sizes need a unit, no progress bar in a piped log, a budget that swaps nothing says so."""
import subprocess
import sys

import pytest

from engine.train import main

TINY = ["--model", "small-lstm", "--batch", "4", "--size", "3", "--search-seconds", "0", "--backend", "cpu"]


def test_version():
    out = subprocess.run([sys.executable, "-m", "engine.train", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("swapengine ")


@pytest.mark.parametrize("argv,pattern", [(["--iter", "3"], "unrecognized arguments: --iter 3"),
                                          (["--mem", "1MiB"], "unrecognized arguments: --mem"),
                                          (["--memory", "64"], "'64' has no unit; write 64B for bytes")])
def test_no_abbreviations_and_sizes_need_a_unit(capsys, argv, pattern):
    assert main(argv) == 2
    assert pattern in capsys.readouterr().err


def test_help_is_grouped_and_shows_defaults():
    out = subprocess.run([sys.executable, "-m", "engine.train", "--help"], capture_output=True, text=True).stdout
    for group in ("model and data:", "training:", "memory and policies:", "genetic search", "backend:", "output:"):
        assert group in out
    assert "tensor dtype (default float32)" in out


def test_no_progress_bar_in_a_piped_log_and_a_budget_over_the_peak_says_so(tmp_path, capsys):
    assert main(TINY + ["--policy", "swapadvisor", "--iterations", "3", "--memory", "1MiB", "--profile", "v100",
                        "--no-check", "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "\r" not in err and "train:" not in err
    assert "nothing needs to swap" in out
