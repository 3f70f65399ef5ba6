"""`engine.train --policy checkpoint` on the built-in models and gpt-tiny: without --memory the
budget grows to the least at which it plans (it keeps on the device what it cannot recompute:
the state, the gradients, its checkpoints); at five budgets from there up, it trains
bit-identically to the unlimited run on the sanitizing cpu backend, and at the least it
recomputes."""
import json

import numpy as np
import pytest

from engine.train import main

COMMON = ["--policy", "checkpoint", "--profile", "v100", "--quiet"]


def report(argv, tmp_path, name):
    path = tmp_path / f"{name}.json"
    assert main(argv + ["--json", str(path), "--out", str(tmp_path / name), "--overwrite"]) == 0
    return json.loads(path.read_text())


@pytest.mark.parametrize("model", ["small-cnn", "small-lstm", "gpt-tiny"])
def test_checkpoint_trains_bit_identically_at_five_budgets(model, tmp_path, capsys):
    argv = ["--model", model] + COMMON
    least = report(argv + ["--simulate-only"], tmp_path, "least")
    budgets = np.geomspace(least["budget_bytes"], 1.3 * least["peak_bytes"], 5).astype(np.int64)
    for i, budget in enumerate(budgets):
        r = report(argv + ["--memory", f"{budget}B", "--backend", "cpu", "--sanitize", "--iterations", "2",
                           "--measure-iterations", "1"], tmp_path, f"b{i}")
        assert r["identical"] is True, f"{model} checkpoint at {budget} bytes"
        if i == 0:
            assert r["policies"][0]["stalls"]["recomputes"] > 0, f"{model}: no recomputation at {budget} bytes"
    capsys.readouterr()
