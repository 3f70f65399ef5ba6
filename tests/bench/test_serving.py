"""bench/serving.py's plot (issue 39: a strategy coloured differently from panel to panel, and
four identical curves drawn on top of each other) and reading a saved results file back."""
import pytest

from bench.serving import STYLES, figure, identical_groups, read_results

BASE = [(50.0, 0.0375, 0.0742, 0.12), (100.0, 0.0375, 0.0978, 0.23), (450.0, 18.4, 37.8, 1.0)]
SLOWER = [(50.0, 0.0387, 0.0755, 0.12), (100.0, 0.0387, 0.0995, 0.24)]


def panels():
    """Two memory sizes: at 1 GiB the strategies differ and 16 models do not fit; at 2 GiB
    partitioned 4 and time_shared 4 serve exactly as not_shared."""
    return {1.0: ({"not_shared": BASE, "partitioned 4": SLOWER, "time_shared 4": SLOWER[:1]},
                  {"partitioned 16": "16 models on 1.0 GiB: each share of 64.0 MiB is below the 114.9 MiB"}),
            2.0: ({"not_shared": BASE, "partitioned 4": list(BASE), "time_shared 4": list(BASE),
                   "partitioned 16": SLOWER}, {})}


def test_identical_curves_are_grouped_in_order():
    curves = panels()[2.0][0]
    assert identical_groups(curves) == [["not_shared", "partitioned 4", "time_shared 4"], ["partitioned 16"]]


def test_each_strategy_looks_the_same_in_every_panel_and_identical_curves_are_drawn_once():
    pytest.importorskip("matplotlib")
    fig = figure(panels(), "ResNet-152, batch 16", source="bench/results/serving_x.txt")
    one, two = fig.axes
    title, caption = (t.get_text() for t in fig.texts)            # suptitle, supxlabel
    looks = {}
    for ax in (one, two):
        for line in ax.get_lines():
            name = line.get_label().split(" = ")[0].split(":")[0]
            look = (line.get_color(), line.get_linestyle(), line.get_marker())
            assert look == (STYLES[name]["color"], STYLES[name]["linestyle"], STYLES[name]["marker"])
            assert looks.setdefault(name, look) == look
    assert len({looks[n] for n in looks}) == len(looks)           # no two strategies share a look
    # 2 GiB: three strategies with the same numbers are one curve whose legend names them all.
    labels = [line.get_label() for line in two.get_lines()]
    assert labels == ["not_shared = partitioned 4 = time_shared 4 (identical numbers)", "partitioned 16"]
    assert "identical numbers are drawn once" in caption
    # Saturated points (p99 over 5 s) are left off; a configuration that does not fit is named.
    assert list(one.get_lines()[0].get_xdata()) == [50.0, 100.0]
    assert any(t.get_text().startswith("partitioned 16: not plotted") for t in one.get_legend().get_texts())
    # The setting and where the data came from are on the figure; axes say their units.
    assert "ResNet-152, batch 16" in title and "Figure 8" in title and "serving_x.txt" in caption
    assert one.get_ylabel() == "p99 latency (ms, log scale)" and "requests/s" in two.get_xlabel()
    assert one.get_title() == "1 GiB shared" and two.get_title() == "2 GiB shared"
    for ax in (one, two):           # legends sit below their panel, over no data
        assert ax.get_legend().get_bbox_to_anchor().y1 < ax.get_window_extent().y0


SAVED = """\
Ours, simulated: batch 16, 224x224, 1 GiB shared, analytic V100 profile, partition plans after 20 s of search, 20000 Poisson batches per point (the first tenth not counted). Costs per batch (ms):
models    full memory
--------  -------------
1         37.55

strategy                    offered req/s    served req/s    device busy    p50 ms    p99 ms    p99 / not_shared
--------------------------  ---------------  --------------  -------------  --------  --------  ----------------
partitioned 16              -                -               -              -         N/A       16 models on 1.0 GiB: too small
not_shared                  50               50              12%            37.5      74.2      1.00x
not_shared                  100              100             23%            37.5      97.8      1.00x
time_shared 4               50               50              12%            37.5      74.2      1.00x

Check against a real run on the CPU backend (AMD EPYC, emulated 0.5 GB/s link): 4 x resnet-50
run    device busy    service median ms    service p99 ms    latency p50 ms    latency p99 ms    simulated p99 error
-----  -------------  -------------------  ----------------  ----------------  ----------------  ---------------------
1      52%            187.6                197.5             194.9             723.6             -6.8%
"""


def test_a_saved_results_file_reads_back_as_the_plot_s_panels():
    got, setting = read_results(SAVED)
    curves, left_out = got[1.0]
    assert list(got) == [1.0] and left_out == {"partitioned 16": "16 models on 1.0 GiB: too small"}
    assert curves == {"not_shared": [(50.0, 0.0375, 0.0742, 0.12), (100.0, 0.0375, 0.0978, 0.23)],
                      "time_shared 4": [(50.0, 0.0375, 0.0742, 0.12)]}
    assert setting.startswith("ResNet-152 224x224, batch 16") and "20 s of search" in setting
    with pytest.raises(ValueError, match="not a bench.serving results file"):
        read_results("hello")
