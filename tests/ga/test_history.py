import builtins
import csv
import json
import math

import pytest

from ga.history import COLUMNS, GenerationStats, history_figure, plot_history, write_history

ROWS = [GenerationStats.of(0.5, 0, [3.0, 1.0, 2.0, math.inf], 4),
        GenerationStats.of(1.5, 1, [1.0, 1.0, 1.5, 2.0], 8),
        GenerationStats.of(2.0, 2, [math.inf], 9)]


def test_stats_are_over_feasible_individuals():
    r = ROWS[0]
    assert (r.best, r.mean, r.worst, r.infeasible, r.evaluations) == (1.0, 2.0, 3.0, 1, 4)
    assert ROWS[2].best == ROWS[2].mean == ROWS[2].worst == math.inf and ROWS[2].infeasible == 1


def test_json_round_trip_writes_null_for_infinity(tmp_path):
    path = tmp_path / "h.json"
    write_history(ROWS, str(path))
    data = json.loads(path.read_text())
    assert data[2]["best"] is None and data[0]["generation"] == 0
    assert [GenerationStats.from_dict(d) for d in data] == ROWS


def test_csv_has_one_row_per_generation(tmp_path):
    path = tmp_path / "h.csv"
    write_history(ROWS, str(path))
    rows = list(csv.reader(path.open()))
    assert rows[0] == COLUMNS and len(rows) == 4
    assert float(rows[2][COLUMNS.index("mean")]) == pytest.approx(1.375)


def test_plot_skips_cleanly_without_matplotlib(tmp_path, monkeypatch, capsys):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert plot_history(ROWS, str(tmp_path / "h.png"), "lstm", "swapadvisor", 2**30) is False
    assert capsys.readouterr().out == ""        # the caller's one summary line says so
    assert not (tmp_path / "h.png").exists()


def test_plot_draws_figure9_when_matplotlib_is_there(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "h.png"
    assert plot_history(ROWS, str(path), "lstm", "swapadvisor", 2**30) is True
    assert path.stat().st_size > 0


def test_search_plot_names_its_setting_and_shows_best_alive_beside_best_so_far():
    """Issue 39: "best alive" was drawn under "best so far" (with elites they coincide), and the
    title named the model only."""
    pytest.importorskip("matplotlib")
    fig = history_figure(ROWS, "lstm", "swapadvisor", 3 * 2**30, note="population 4, seed 0")
    (ax,) = fig.axes
    title = ax.get_title()
    assert "lstm" in title and "swapadvisor" in title and "3.0 GiB" in title and "population 4" in title
    assert "1 generation with no feasible individual (gaps)" in title
    assert ax.get_xlabel() == "search time (s)" and "s/iteration" in ax.get_ylabel()
    lines = {line.get_label(): line for line in ax.get_lines()}
    alive, so_far = lines["best alive"], next(v for k, v in lines.items() if k.startswith("best so far"))
    assert list(alive.get_ydata()[:2]) == list(so_far.get_ydata()[:2]) == [1.0, 1.0]    # the same values...
    assert alive.get_zorder() > so_far.get_zorder() and alive.get_marker() == "o"     # ...the thin one on top
    assert so_far.get_linewidth() >= 3 * alive.get_linewidth() and so_far.get_alpha() < 1
    assert alive.get_color() != so_far.get_color()
    legend = ax.get_legend()
    assert {t.get_text() for t in legend.get_texts()} == set(lines)
    assert legend.get_bbox_to_anchor().x0 >= ax.get_window_extent().x1      # beside the axes, hiding nothing
