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
