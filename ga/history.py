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


def plot_history(history: list[GenerationStats], path: str, title: str | None = None) -> bool:
    """Best, mean and worst simulated time against search time (Figure 9), saved to ``path``.
    Needs matplotlib (the 'plot' extra); without it, returns False (the caller says so)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    x = [r.elapsed_s for r in history]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, style in (("worst", ":"), ("mean", "--"), ("best", "-")):
        y = [getattr(r, name) if math.isfinite(getattr(r, name)) else np.nan for r in history]
        ax.plot(x, y, style, label=f"{name} alive")
    # Best so far, with a marker per generation, so one generation still shows a point.
    best = np.fmin.accumulate([r.best if math.isfinite(r.best) else np.nan for r in history])
    ax.plot(x, best, "o-", markersize=3, label="best so far")
    ax.set_xlabel("search time (s)")
    ax.set_ylabel("simulated time (s/iteration)")
    if title:
        ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
