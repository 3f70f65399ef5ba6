"""The throughput report: one row per policy, every figure simulated or measured by this run."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from tabulate import tabulate

from .units import format_bytes

MiB = 2**20


@dataclass
class PolicyRow:
    policy: str
    sim_s: float                 # simulated seconds per iteration
    real_s: float | None         # measured seconds per iteration (None: simulate-only)
    batch: int
    h2d_bytes: int
    d2h_bytes: int
    device_bytes: int            # the pool's arena: the device memory the policy uses
    instructions: int
    unlimited: bool = False      # the unlimited-memory plan the others are compared with
    bound_s: float | None = None  # lower bound on sim_s for the plan's order under its budget, recomputing allowed
    stalls: dict | None = None    # the simulated iteration's stall report (planner.stalls), as JSON
    real_spread: float | None = None  # interquartile range / median of the timed iterations (``spread``)
    swap_bound_s: float | None = None  # the same bound for plans that only swap

    @property
    def x_bound(self) -> float | None:
        """Simulated time over its lower bound: 1.00 is as fast as any plan could be."""
        return self.sim_s / self.bound_s if self.bound_s else None

    @property
    def x_swap_bound(self) -> float | None:
        """Simulated time over the bound for plans that only swap (below 1 only if it recomputes)."""
        return self.sim_s / self.swap_bound_s if self.swap_bound_s else None

    def samples_per_s(self) -> float:
        t = self.real_s if self.real_s is not None else self.sim_s
        return self.batch / t if t > 0 else 0.0


def policy_table(rows: list[PolicyRow]) -> str:
    ideal = next((r for r in rows if r.unlimited), None)
    measured = all(r.real_s is not None for r in rows)
    out = []
    for r in rows:
        vs = ideal.samples_per_s() and r.samples_per_s() / ideal.samples_per_s() if ideal else None
        line = [r.policy, f"{r.sim_s:.4f}"]
        if measured:
            line.append(f"{r.real_s:.4f}")
        line += [f"{r.samples_per_s():.1f}", f"{vs:.2f}" if vs is not None else "-",
                 f"{r.x_bound:.2f}" if r.x_bound is not None else "-",
                 f"{r.x_swap_bound:.2f}" if r.x_swap_bound is not None else "-",
                 f"{r.h2d_bytes / MiB:.1f}", f"{r.d2h_bytes / MiB:.1f}", f"{r.device_bytes / MiB:.1f}"]
        out.append(line)
    headers = ["policy", "sim s/iter"] + (["real s/iter"] if measured else []) + [
        "samples/s", "vs ideal", "x bound", "x swap bound", "H2D MiB", "D2H MiB", "device MiB"]
    note = ("samples/s from measured time" if measured else "samples/s from simulated time (nothing executed)")
    spreads = [r.real_spread for r in rows if r.real_spread is not None]
    if measured and spreads:
        note += f", timed iterations' interquartile spread up to {max(spreads):.0%} of their median"
    note += ("; x bound: simulated time over the lower bound for its order and budget, recomputing allowed; "
             "x swap bound: over the bound for plans that only swap")
    return tabulate(out, headers=headers, disable_numparse=True) + f"\n({note})" + recompute_note(rows)


def recompute_note(rows: list[PolicyRow]) -> str:
    """A line under the table for plans that recompute (from their stall reports), else nothing."""
    recomputing = [r for r in rows if r.stalls and r.stalls.get("recomputes")]
    return "".join(f"\n{r.policy}: {r.stalls['recomputes']} recomputations, {r.stalls['recompute_s']:.3g} s of "
                   f"compute, {format_bytes(r.stalls['recomputed_bytes'])} not swapped out and back"
                   for r in recomputing)


# Timed iterations spread wider than this around their median make a measured time noise.
NOISY_SPREAD = 0.25


def spread(times) -> float | None:
    """The interquartile range of timed iterations over their median (one slow iteration in
    fifteen, a page fault or a collection, does not move it); None for fewer than two."""
    if len(times) < 2:
        return None
    q1, median, q3 = np.percentile(np.asarray(times, dtype=float), [25, 50, 75])
    return float((q3 - q1) / median) if median > 0 else None


def timing_warnings(rows: list[PolicyRow], load: float | None, cores: int) -> list[str]:
    """Why the measured column may not be trusted, one line each: the machine was busy
    (``load``, its one-minute load average, at least ``cores``), a policy's timed iterations
    spread widely, or a plan that swaps measured faster than the unlimited one (which moves
    nothing, so only noise can put it ahead)."""
    if not rows or any(r.real_s is None for r in rows):
        return []
    out = []
    if load is not None and load >= cores:
        out.append(f"the machine was busy while timing (load average {load:.1f} on {cores} cores): measured "
                   "times may be off; the simulated ones are not")
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
                   f"s/iter) though it moves {(r.h2d_bytes + r.d2h_bytes) / MiB:.1f} MiB and {ideal.policy} none: "
                   "the difference is timing noise")
    return out


def rows_to_json(rows: list[PolicyRow]) -> list[dict]:
    return [dict(asdict(r), samples_per_s=r.samples_per_s(), x_bound=r.x_bound, x_swap_bound=r.x_swap_bound)
            for r in rows]
