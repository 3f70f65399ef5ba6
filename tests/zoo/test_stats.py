import json

import pytest

from zoo import stats


def test_measure_counts_a_small_model():
    m = stats.measure("wresnet-14-1", batch=2, size=32)
    assert m.input == "32x32" and m.batch == 2
    assert 0 < m.updates < m.operators and m.distinct_sizes > 5
    assert 0 < m.parameter_bytes < m.peak_bytes <= m.total_bytes
    r = stats.measure("rnn-1-0.25k", batch=2, size=3)
    assert r.input == "3 steps"


def test_table_has_ours_beside_the_papers_figures():
    row = stats.PAPER[0]
    text = stats.table([(row, stats.measure("wresnet-14-1", batch=2, size=32))])
    assert "WResNet-152-10" in text and "paper ops" in text and "882" in text and "180.0" in text


@pytest.mark.slow
def test_command_prints_table_1_at_paper_scale(tmp_path, capsys):
    out = tmp_path / "t1.json"
    assert stats.main(["--quiet", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    for row in stats.PAPER:
        assert row.label in text
    figures = json.loads(out.read_text())
    assert [f["paper"]["model"] for f in figures] == [r.model for r in stats.PAPER]
    ours = {f["ours"]["model"]: f["ours"] for f in figures}
    # counts within an order of magnitude of the paper's, and the sizes the paper reports for RNNs
    for row in stats.PAPER:
        assert 0.1 < ours[row.model]["operators"] / row.ops < 10
        assert 0.1 < ours[row.model]["distinct_sizes"] / row.sizes < 10
    assert ours["rnn-8-8k"]["distinct_sizes"] == 7 and ours["brnn-4-8k"]["distinct_sizes"] == 9
    # the CNNs' peak memory within 35% of the paper's memory usage
    for row in stats.PAPER[:3]:
        assert abs(ours[row.model]["peak_bytes"] / 1e9 / row.mem_gb - 1) < 0.35


def test_gpt_presets_table_lists_parameters_activations_and_optimizer_state(capsys):
    m = stats.measure_preset("gpt2-small")
    assert m.parameters == 124_439_808 and m.parameter_bytes == 4 * m.parameters
    assert m.optimizer_state_bytes >= 2 * m.parameter_bytes          # AdamW's two moments
    assert m.parameter_bytes < m.peak_bytes and m.activation_bytes > 0
    assert stats.main(["--gpt"]) == 0
    text = capsys.readouterr().out
    assert all(name in text for name in ("gpt-tiny", "gpt2-xl", "gpt-7b")) and "optimizer state GiB" in text
