"""bench/smartswap_long.py, short: the acceptance run's checks on 24 iterations (the committed
result is the 1000-iteration run)."""
import pytest

import bench.smartswap_long as long_run
from engine.op_monitor import GENPOLICY


# The forced non-finite step warns from the cpu backend's stream threads (np.errstate is per thread).
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_short_changing_graph_run_is_bit_identical_and_logs_its_stages():
    r = long_run.run(iterations=24, eval_every=20, nonfinite_at=21)
    assert r["identical"]
    assert r["skipped"] == 1 and r["updates"] >= 6
    assert len(r["rss"]) == 24 and r["rss"].min() > 0
    stages = [s for _, s in r["monitor"].transitions()]
    assert GENPOLICY in stages                          # it left WarmUp at least once
    assert r["planner"].cache.misses == 5               # three lengths, the update, the evaluation


def test_the_plot_names_model_budget_and_marks_evaluations_and_the_forced_step():
    pytest.importorskip("matplotlib")
    import numpy as np

    from engine.op_monitor import Monitor
    mon = Monitor()
    mon.log = [(i, "WarmUp", "k", 0.0) for i in range(10)]
    fig = long_run.figure(dict(iterations=10, eval_every=4, nonfinite_at=5, fraction=0.5, device=3 * 2**20,
                               peak=6 * 2**20, monitor=mon, rss=np.full(10, 2**20)))
    stages, rss = fig.axes
    (title,) = [t.get_text() for t in fig.texts]
    assert "gpt-tiny" in title and "budget 3.0 MiB = 0.5" in title
    marks = stages.get_lines()[1:]                  # after the stage's step line
    assert [line.get_xdata()[0] for line in marks] == [3, 7, 5]      # evaluations (every 4th), then the forced step
    assert [marks[0].get_label(), marks[2].get_label()] == ["evaluation iteration", "forced non-finite loss"]
