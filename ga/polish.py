"""The end of a search with knobs (not in the paper): the best genome's knob values polished.

The GA moves a child's knob values one grid step at a time with a small probability, so a
search can end on a schedule and allocation whose best knob value it never tried with them:
the joint search of RNN-8-8K (10 minutes, 2 cores) ended at headroom 0.375, 16.550 s, while
the swap-only search found headroom 0.5, 16.492 s. Polishing is coordinate descent on the
knobs alone: with the best schedule and allocation fixed, every other value of each knob is
planned (one batch, on the search's workers), the fastest taken if it beats the best, and
again from there, for at most ``ROUNDS`` rounds. It costs at most ``ROUNDS`` x (the knobs'
grid sizes less one each) evaluations: 30 for swapadvisor's three knobs, seconds where a
10-minute search makes thousands.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from planner.policy import Knob

from .population import Individual, canonical_options

ROUNDS = 3


@dataclass(frozen=True)
class Polished:
    """What polishing did: the best before and after, and the evaluations it made."""
    before: Individual
    after: Individual
    evaluations: int

    @property
    def improved(self) -> bool:
        return self.after.time < self.before.time

    def describe(self) -> str:
        """e.g. ``headroom 0.375 -> 0.5: 16.55 -> 16.49 s (10 evaluations)``."""
        if not self.improved:
            return f"no knob change helped ({self.evaluations} evaluations)"
        old, new = dict(self.before.options), dict(self.after.options)
        moved = ", ".join(f"{name} {old[name]:g} -> {new[name]:g}"
                          for name in sorted(new) if old.get(name) != new[name])
        return f"{moved}: {self.before.time:.4g} -> {self.after.time:.4g} s ({self.evaluations} evaluations)"


def knob_neighbours(options: tuple, knobs: Mapping[str, Knob]) -> list[tuple]:
    """The knob values ``options`` becomes when one knob takes another value of its grid (in
    canonical form, each once, ``options`` itself left out)."""
    values = dict(options)
    seen = {canonical_options(options, knobs)}
    out = []
    for name, knob in sorted(knobs.items()):
        for v in knob.values:
            if v == values.get(name, knob.default):
                continue
            moved = canonical_options(tuple(sorted({**values, name: v}.items())), knobs)
            if moved not in seen:
                seen.add(moved)
                out.append(moved)
    return out


def polish(best: Individual, knobs: Mapping[str, Knob],
           evaluate: Callable[[list[tuple]], list[Individual]], rounds: int = ROUNDS) -> Polished:
    """Coordinate descent on ``best``'s knob values; ``evaluate`` plans and times a list of
    (schedule, allocation, options) tasks, in order (the search's workers)."""
    current, evaluations = best, 0
    for _ in range(rounds):
        neighbours = knob_neighbours(current.options, knobs)
        if not neighbours:
            break
        tried = evaluate([(current.schedule, current.allocation, options) for options in neighbours])
        evaluations += len(tried)
        fastest = min(tried, key=lambda ind: ind.time)
        if not fastest.time < current.time:
            break
        current = fastest
    return Polished(best, current, evaluations)


def evaluate_task(breeder, task: tuple) -> Individual:
    schedule, allocation, options = task
    return breeder.evaluated(schedule, allocation, options)
