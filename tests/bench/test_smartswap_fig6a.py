"""bench.smartswap_fig6a, quick: both arms simulated with the host timeline on small Llamas, the
verdicts printed; bad input refused in one line."""
import importlib.util

import pytest

from bench import smartswap_fig6a as f


def test_quick_run_prints_both_arms_and_verdicts(capsys, tmp_path):
    assert f.main(["--quick", "--layers", "3,4,5", "--query-us", "0,1", "--png", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "recordStream 0 us/query s" in out and "break-even us/query" in out
    assert "ours (release points, no queries)" in out and out.count("the paper's claim") == 3
    if importlib.util.find_spec("matplotlib"):               # the plot extra: CI installs only the test one
        assert (tmp_path / "smartswap_fig6a_quick.png").stat().st_size > 0
    else:
        assert "matplotlib is not installed" in out and not list(tmp_path.iterdir())


def test_zero_cost_queries_change_nothing_and_costly_ones_slow_the_step():
    from engine.profile import analytic_profile
    device = f.quick_device()
    p = f.point(f.Setting(2, 4, 256, 256), device, 1000, analytic_profile("910b"), 0.0, (0.0, 1e-3))
    assert p.swap_outs > 0 and p.queries_per_block > p.queries_fifo > 0
    assert p.ours_s == p.device_s == p.per_block_s[0.0] == p.fifo_s[0.0]       # a free host: the device's time
    assert p.per_block_s[1e-3] >= p.queries_per_block * 1e-3 > p.fifo_s[1e-3] > p.ours_s
    assert p.interval_sync > p.interval_ours


@pytest.mark.parametrize("flag, value, says", [("--layers", "0", "at least 1"), ("--query-us", "x", "not a comma"),
                                               ("--dispatch-us", "-1", "at least 0")])
def test_bad_input_is_one_line(capsys, flag, value, says):
    with pytest.raises(SystemExit) as e:
        f.main(["--quick", flag, value])
    assert e.value.code == 2 and says in capsys.readouterr().err
