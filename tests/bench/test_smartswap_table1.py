"""bench.smartswap --table1, short: both monitoring modes timed in one cpu run, beside 004 Table 1."""
import pytest

from bench import smartswap


def test_table1_prints_both_modes_beside_the_papers(capsys):
    assert smartswap.main(["--table1", "--cpu-iterations", "12", "--cpu-repeats", "1"]) == 0
    out = capsys.readouterr().out
    for row in ("baseline (no monitor)", "low-overhead mode", "detailed mode", "PyTorch's built-in profiler"):
        assert row in out
    assert "34.6%" in out and "219.7%" in out and "detailed over low-overhead mode" in out


def test_too_few_iterations_is_one_line_not_a_traceback(capsys):
    with pytest.raises(SystemExit) as e:
        smartswap.main(["--table1", "--cpu-iterations", "1"])
    assert e.value.code == 2 and "--cpu-iterations: 1 is below 2" in capsys.readouterr().err
