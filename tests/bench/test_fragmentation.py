"""bench/fragmentation.py's plot (issue 39: it lacked paper 001's budget line)."""
import pytest

from bench.fragmentation import GIB, PLOT_BATCH, figure, window_budget
from planner.budget import make_budget
from planner.errors import PlanError
from planner.facts import GraphFacts

HISTORIES = {"bestfit": [(0, 0), (3 * GIB, 2 * GIB), (20 * GIB, 15 * GIB), (20 * GIB, 1 * GIB)],
             "va 2 MiB": [(0, 0), (2 * GIB, 2 * GIB), (15 * GIB, 15 * GIB), (15 * GIB, 1 * GIB)]}


def test_every_panel_draws_the_budget_across_it():
    pytest.importorskip("matplotlib")
    fig = figure(HISTORIES, 16 * GIB)
    assert len(fig.axes) == 2
    for ax, label in zip(fig.axes, HISTORIES):
        budget = [line for line in ax.get_lines() if line.get_label().startswith("budget")]
        assert len(budget) == 1, [line.get_label() for line in ax.get_lines()]
        (line,) = budget
        assert list(line.get_ydata()) == [16, 16] and line.get_label() == "budget: 16 GiB device (001's V100: 16 GB)"
        assert list(line.get_xdata()) == [0, 1]           # across the whole panel (axes coordinates)
        assert ax.get_title().startswith(label) and "x peak requested" in ax.get_title()
        assert "allocator call" in ax.get_xlabel()
    assert fig.axes[0].get_title() == "bestfit: peak reserved 1.33x peak requested"
    assert fig.axes[0].get_ylabel() == "memory (GiB)"
    (legend,) = fig.legends                               # one legend, outside the panels
    assert {t.get_text() for t in legend.get_texts()} == {
        "requested (live tensors)", "reserved (held by the allocator)", "budget: 16 GiB device (001's V100: 16 GB)"}
    (title,) = [t.get_text() for t in fig.texts]
    assert f"batch {PLOT_BATCH}" in title and "within 16 GiB" in title and "wresnet-50-1" in title


def test_another_budget_is_not_called_001_s():
    pytest.importorskip("matplotlib")
    fig = figure(HISTORIES, 12 * GIB)
    assert [line.get_label() for line in fig.axes[0].get_lines()][-1] == "budget: 12 GiB device"


def test_the_window_is_refused_only_below_what_its_allocators_need():
    """Not below the size-class pool's smallest allocation, which the window never uses."""
    import zoo
    facts = GraphFacts(zoo.tiny("wresnet"))
    online = facts.demand.heaviest_bytes + facts.scratch.bytes
    assert online < facts.smallest_budget                 # the pool's gate is the stricter one
    assert window_budget(facts, online).device_bytes == online
    with pytest.raises(PlanError):
        make_budget(facts, online)
    with pytest.raises(PlanError):
        window_budget(facts, online - 1)
