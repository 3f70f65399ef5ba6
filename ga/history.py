"""The search's per-generation log and its outputs: CSV, JSON, and the paper's Figure 9 plot.

A row is one generation: seconds since the search started, the generation number, the best,
mean and worst simulated time of the individuals alive after it (over the feasible ones;
``inf`` when none is), how many are infeasible, and the evaluations done so far.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, dataclass, fields

import numpy as np

from engine.units import format_bytes


@dataclass
class GenerationStats:
    elapsed_s: float
    generation: int
    best: float
    mean: float
    worst: float
    infeasible: int
    evaluations: int

    @classmethod
    def of(cls, elapsed_s: float, generation: int, times, evaluations: int) -> GenerationStats:
        t = np.asarray(times, dtype=float)
        ok = t[np.isfinite(t)]
        if ok.size:
            best, mean, worst = float(ok.min()), float(ok.mean()), float(ok.max())
        else:
            best = mean = worst = math.inf
        return cls(float(elapsed_s), int(generation), best, mean, worst, int(t.size - ok.size), int(evaluations))

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> GenerationStats:
        return cls(**{f.name: (math.inf if d[f.name] is None else d[f.name]) for f in fields(cls)})


COLUMNS = [f.name for f in fields(GenerationStats)]


def write_history(history: list[GenerationStats], path: str) -> None:
    """CSV when ``path`` ends in .csv, else JSON (a list of rows; null for infinite times)."""
    if str(path).endswith(".csv"):
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(COLUMNS)
            for row in history:
                w.writerow([getattr(row, c) for c in COLUMNS])
    else:
        with open(path, "w") as f:
            json.dump([row.to_dict() for row in history], f, indent=1)


def search_title(model: str, policy: str, budget_bytes: int) -> str:
    """What a search plot shows and under which setting: the model, the policy searched, the budget."""
    return f"{model}: {policy} search within a {format_bytes(budget_bytes)} budget"


def history_figure(history: list[GenerationStats], model: str, policy: str, budget_bytes: int,
                   note: str | None = None):
    """Figure 9 as a matplotlib Figure: the worst, mean and best simulated time of the individuals
    alive after each generation, and the best found so far, against search time. With elites the
    best alive is the best so far, so the two are drawn apart: the best so far as a wide pale step
    underneath, the best alive as a thin line with a marker per generation on top. Raises
    ImportError without matplotlib."""
    from matplotlib.figure import Figure

    x = [r.elapsed_s for r in history]

    def column(name):
        return [getattr(r, name) if math.isfinite(getattr(r, name)) else np.nan for r in history]

    fig = Figure(figsize=(7.5, 4), layout="constrained")
    ax = fig.add_subplot()
    best = np.fmin.accumulate(column("best"))
    ax.plot(x, best, drawstyle="steps-post", color="tab:orange", linewidth=6, alpha=0.35, zorder=1,
            label="best so far (wide band)")
    for name, style, colour in (("worst", ":", "tab:gray"), ("mean", "--", "tab:green")):
        ax.plot(x, column(name), style, color=colour, zorder=2, label=f"{name} alive")
    # A marker per generation, so one generation still shows a point.
    ax.plot(x, column("best"), "o-", color="tab:blue", markersize=3, linewidth=1.2, zorder=3, label="best alive")
    ax.set_xlabel("search time (s)")
    ax.set_ylabel("simulated time (s/iteration)")
    infeasible = sum(1 for r in history if not math.isfinite(r.best))
    gaps = f"{infeasible} generation{'s' * (infeasible != 1)} with no feasible individual (gaps)"
    notes = [n for n in (note, gaps if infeasible else None) if n]
    ax.set_title("\n".join([search_title(model, policy, budget_bytes)] + notes), fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))      # beside the data, not on it
    return fig


def plot_history(history: list[GenerationStats], path: str, model: str, policy: str, budget_bytes: int,
                 note: str | None = None) -> bool:
    """Figure 9 (``history_figure``) saved to ``path``. Needs matplotlib (the 'plot' extra);
    without it, returns False (the caller says so)."""
    try:
        fig = history_figure(history, model, policy, budget_bytes, note)
    except ImportError:
        return False
    fig.savefig(path)
    return True
