"""The stage machine of 004 Algorithm 1 on crafted sequences (m = 2, n = 5)."""
import numpy as np
import pytest

from engine.op_monitor import (GENPOLICY, STABLE, STAGES, WARMUP, StageMachine, Tokenizer, cosine, key_of,
                               length_change, stages_figure)


def mix(ones: int, twos: int) -> np.ndarray:
    return np.array([1] * ones + [2] * twos, dtype=np.int64)


def settled(seq) -> StageMachine:
    """A machine that has seen ``seq`` long enough to be Stable."""
    m = StageMachine()
    stages = [m.update(seq) for _ in range(9)]
    # 3 similar iterations (> m = 2) to GenPolicy, then 6 (> n = 5) to Stable.
    assert stages == [WARMUP, WARMUP, GENPOLICY] + [GENPOLICY] * 5 + [STABLE]
    return m


BASE = mix(50, 50)


@pytest.mark.parametrize("seq, change, stays", [
    (mix(52, 52), 0.04, True),      # +4% length
    (mix(48, 48), 0.04, True),      # -4%
    (mix(53, 53), 0.06, False),     # +6%: back to WarmUp
    (mix(47, 47), 0.06, False),     # -6%
])
def test_length_changes_within_5_percent_stay(seq, change, stays):
    m = settled(BASE)
    assert length_change(seq, BASE) == pytest.approx(change)
    assert (m.update(seq) == STABLE) is stays
    if not stays:
        assert m.stage == WARMUP and m.stable_steps == 0


@pytest.mark.parametrize("j, cos, stays", [(14, 0.963, True), (18, 0.941, False)])
def test_cosine_above_95_percent_stays(j, cos, stays):
    m = settled(BASE)
    seq = mix(50 + j, 50 - j)                    # same length, token counts moved
    assert cosine(seq, BASE) == pytest.approx(cos, abs=0.001)
    assert (m.update(seq) == STABLE) is stays


def test_back_to_warmup_then_up_again():
    m = settled(BASE)
    other = mix(80, 40)
    assert m.update(other) == WARMUP
    assert [m.update(other) for _ in range(3)] == [WARMUP, WARMUP, GENPOLICY]


def test_tokens_carry_kind_and_size_and_the_key_is_exact():
    import zoo
    a, b = zoo.tiny("gpt", seq=6), zoo.tiny("gpt", seq=5, positions=6)
    tk = Tokenizer()
    sa, sb = tk.sequence([a]), tk.sequence([b])
    assert len(sa) == len(a.nodes) and sa.dtype == np.int64
    assert key_of(tk.exact([a])) != key_of(tk.exact([b]))          # other sizes: another plan
    assert key_of(tk.exact([a])) == key_of(tk.exact([zoo.tiny("gpt", seq=6)]))


LOG = [(0, WARMUP, "a", 0.0), (1, GENPOLICY, "a", 0.0), (2, STABLE, "a", 0.0), (3, WARMUP, "b", 0.0),
       (4, WARMUP, "a", 0.0)]


def test_stage_plot_says_what_and_under_which_setting_and_marks_what_moved_the_stage():
    """Issue 39: every plot has a title naming its setting, labelled axes, a legend over no data."""
    pytest.importorskip("matplotlib")
    fig = stages_figure(LOG, "gpt-tiny: smartswap, budget 1.0 MiB", evaluations=[3], nonfinite=[2],
                        rss=np.full(5, 2**20))
    stages, rss = fig.axes
    assert [t.get_text() for t in fig.texts] == ["gpt-tiny: smartswap, budget 1.0 MiB"]      # the suptitle
    assert stages.get_ylabel() == "monitor stage" and [t.get_text() for t in stages.get_yticklabels()] == list(STAGES)
    assert rss.get_ylabel() == "resident set size (MiB)" and list(rss.get_lines()[-1].get_ydata()) == [1.0] * 5
    assert rss.get_xlabel().startswith("iteration")
    marks = {line.get_label(): list(line.get_xdata()) for line in stages.get_lines()}
    assert marks["evaluation iteration"] == [3, 3] and marks["forced non-finite loss"] == [2, 2]
    legend = stages.get_legend()
    assert {t.get_text() for t in legend.get_texts()} == {"monitor stage", "evaluation iteration",
                                                          "forced non-finite loss"}
    assert legend.get_bbox_to_anchor().x0 >= stages.get_window_extent().x1        # beside the panel


def test_stage_plot_without_rss_is_one_panel():
    pytest.importorskip("matplotlib")
    fig = stages_figure(LOG, "t")
    (ax,) = fig.axes
    assert ax.get_xlabel().startswith("iteration") and {t.get_text() for t in ax.get_legend().get_texts()} == {
        "monitor stage"}
