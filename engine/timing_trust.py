"""How far to trust measured iteration times: their spread, the machine's load around the
timing, and plans measured faster than physics allows. Measured times on a shared host lie
(issue 39: a loaded host printed swapping 1.87-2.67x faster than ideal), so the report says
so beside them instead of leaving the reader to guess."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .units import format_bytes

if TYPE_CHECKING:
    from .report import PolicyRow

# Timed iterations spread wider than this around their median make a measured time noise.
NOISY_SPREAD = 0.25


def spread(times) -> float | None:
    """The interquartile range of timed iterations over their median (one slow iteration in
    fifteen, a page fault or a collection, does not move it); None for fewer than two."""
    if len(times) < 2:
        return None
    q1, median, q3 = np.percentile(np.asarray(times, dtype=float), [25, 50, 75])
    return float((q3 - q1) / median) if median > 0 else None


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask: a container or taskset may allow
    fewer than the machine has, and a load above those is what slows it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:                  # not Linux
        return max(1, os.cpu_count() or 1)


def load_average() -> float | None:
    """The machine's one-minute load average; None where the system does not tell."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


@dataclass(frozen=True)
class HostLoad:
    """The one-minute load average just before and just after the timed iterations, and the
    cores this process may use. Both ends are read because a one-minute average lags: a burst
    that ended during the timing shows only before it, one that started only after."""
    before: float | None
    after: float | None
    cores: int

    @classmethod
    def now(cls, before: float | None) -> "HostLoad":
        """Close the window opened by ``before = load_average()``."""
        return cls(before, load_average(), usable_cores())

    @property
    def highest(self) -> float | None:
        known = [x for x in (self.before, self.after) if x is not None]
        return max(known) if known else None

    @property
    def busy(self) -> bool:
        """More runnable work than cores to run it: our iterations waited for a core."""
        return self.highest is not None and self.highest > self.cores

    def describe(self) -> str:
        ends = "/".join("?" if x is None else f"{x:.1f}" for x in (self.before, self.after))
        return f"load average {ends} before/after timing on {self.cores} usable cores"


def busy_warning(load: HostLoad | None) -> str | None:
    """One line when the machine was busy around the timing (``HostLoad.busy``), else None."""
    if load is None or not load.busy:
        return None
    return (f"the machine was busy while timing ({load.describe()}): measured times may be off; the "
            "simulated ones are not")


def timing_warnings(rows: list["PolicyRow"], load: HostLoad | None) -> list[str]:
    """Why the measured column may not be trusted, one line each: the machine was busy (its
    load above the cores this process may use, before or after timing), a policy's timed
    iterations spread widely, or a plan that swaps measured faster than the unlimited one
    (which moves nothing, so only noise can put it ahead)."""
    if not rows or any(r.real_s is None for r in rows):
        return []
    busy = busy_warning(load)
    out = [busy] if busy else []
    noisy = [r for r in rows if r.real_spread is not None and r.real_spread > NOISY_SPREAD]
    if noisy:
        worst = max(noisy, key=lambda r: r.real_spread)
        out.append(f"{worst.policy}'s timed iterations spread {worst.real_spread:.0%} of their median (interquartile): its "
                   "measured time is noise at this size (more --measure-iterations, or a quieter machine)")
    ideal = next((r for r in rows if r.unlimited), None)
    faster = [r for r in rows if ideal and not r.unlimited and r.h2d_bytes + r.d2h_bytes and r.real_s < ideal.real_s]
    if faster:
        r = min(faster, key=lambda r: r.real_s)
        out.append(f"{r.policy} measured faster than {ideal.policy} ({r.real_s:.4f} against {ideal.real_s:.4f} "
                   f"s/iter) though it moves {format_bytes(r.h2d_bytes + r.d2h_bytes)} and {ideal.policy} none: "
                   "the difference is timing noise")
    return out
