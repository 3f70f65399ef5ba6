"""The throughput report: one row per policy, every figure simulated or measured by this run."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from tabulate import tabulate

from .units import format_bytes, format_in, unit_that_fits


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
    real_min_s: float | None = None   # the fastest and slowest timed iterations (None: simulate-only)
    real_max_s: float | None = None

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


def policy_table(rows: list[PolicyRow], peak_bytes: int | None = None) -> str:
    """The table, its note, and lines under it; ``peak_bytes``: the unlimited-memory peak, so
    an unlimited plan's arena above it is explained."""
    ideal = next((r for r in rows if r.unlimited), None)
    measured = all(r.real_s is not None for r in rows)
    # each byte column in the unit its largest figure fits (paper scale reads in GiB, not 89456.1 MiB)
    units = [unit_that_fits(max((getattr(r, col) for r in rows), default=0))
             for col in ("h2d_bytes", "d2h_bytes", "device_bytes")]
    out = []
    for r in rows:
        vs = ideal.samples_per_s() and r.samples_per_s() / ideal.samples_per_s() if ideal else None
        line = [r.policy, f"{r.sim_s:.4f}"]
        if measured:
            line += [f"{r.real_s:.4f}", f"{r.real_spread:.0%}" if r.real_spread is not None else "-"]
        line += [f"{r.samples_per_s():.1f}", f"{vs:.2f}" if vs is not None else "-",
                 f"{r.x_bound:.2f}" if r.x_bound is not None else "-",
                 f"{r.x_swap_bound:.2f}" if r.x_swap_bound is not None else "-"]
        line += [format_in(n, unit) for n, unit in zip((r.h2d_bytes, r.d2h_bytes, r.device_bytes), units)]
        out.append(line)
    headers = ["policy", "sim s/iter"] + (["real s/iter", "spread"] if measured else []) + [
        "samples/s", "vs ideal", "x bound", "x swap bound"] + [
        f"{name} {unit}" for name, (unit, _) in zip(("H2D", "D2H", "device"), units)]
    note = ("samples/s from measured time" if measured else "samples/s from simulated time (nothing executed)")
    if measured:
        note += "; spread: the timed iterations' interquartile range over their median"
    note += ("; x bound: simulated time over the lower bound for its order and budget, recomputing allowed; "
             "x swap bound: over the bound for plans that only swap")
    return (tabulate(out, headers=headers, disable_numparse=True) + f"\n({note})" + device_note(rows, peak_bytes)
            + recompute_note(rows))


def device_note(rows: list[PolicyRow], peak_bytes: int | None) -> str:
    """A line under the table when an unlimited plan's device memory exceeds the unlimited
    peak: not a wrong figure but its allocation's cost. It gives each tensor size its own
    objects, as many as that size's own peak count (planner.allocation.unlimited_allocation),
    and sizes peak at different steps, so the objects add up to more than is live at any one
    step (gpt2-xl: 104.0 GiB against a 95.6 GiB peak); operator scratch comes on top."""
    over = [r for r in rows if r.unlimited and peak_bytes and r.device_bytes > peak_bytes]
    return "".join(f"\n{r.policy}'s device memory {format_bytes(r.device_bytes)} exceeds the unlimited-memory peak "
                   f"{format_bytes(peak_bytes)}: each tensor size has its own objects for its own peak count, and "
                   "sizes peak at different steps (operator scratch adds the rest)" for r in over)


def recompute_note(rows: list[PolicyRow]) -> str:
    """A line under the table for plans that recompute (from their stall reports), else nothing."""
    recomputing = [r for r in rows if r.stalls and r.stalls.get("recomputes")]
    return "".join(f"\n{r.policy}: {r.stalls['recomputes']} recomputations, {r.stalls['recompute_s']:.3g} s of "
                   f"compute, {format_bytes(r.stalls['recomputed_bytes'])} not swapped out and back"
                   for r in recomputing)


def rows_to_json(rows: list[PolicyRow]) -> list[dict]:
    return [dict(asdict(r), samples_per_s=r.samples_per_s(), x_bound=r.x_bound, x_swap_bound=r.x_swap_bound)
            for r in rows]
