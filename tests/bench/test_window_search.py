"""bench.window_search: the window search as it is against other constants, side by side."""
import pytest

from bench import window_search


def test_every_kept_size_settled_again_changes_no_tiny_plan(capsys):
    """As is (kept sizes far behind the fastest not settled again) against settling the three
    fastest kept sizes again whatever their time: the same plans, no more passes."""
    import planner.policies.window as window
    margin = window.RESETTLE_MARGIN
    assert window_search.main(["--quick", "--set", "RESETTLE_MARGIN=inf"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if not line.startswith(("#", "model"))]
    assert len(rows) == 5 * len(window_search.QUICK_TINY)
    for model, size, unit, now, now_passes, other, other_passes, change in rows:
        assert now == other and change == "same"
        assert int(now_passes) <= int(other_passes)
    assert window.RESETTLE_MARGIN == margin      # set back after the run


@pytest.mark.parametrize("setting", ["FOO=1", "SEARCH_FRACTIONS=2", "REPLANNED=many"])
def test_a_setting_that_is_not_a_numeric_constant_is_one_line(setting):
    with pytest.raises(SystemExit) as e:
        window_search.main(["--quick", "--set", setting])
    assert "bench.window_search: --set" in str(e.value) and "\n" not in str(e.value)
