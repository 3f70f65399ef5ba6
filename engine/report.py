"""The throughput report: one row per policy, every figure simulated or measured by this run."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from tabulate import tabulate

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
    bound_s: float | None = None  # lower bound on sim_s for the plan's order under its budget
    stalls: dict | None = None    # the simulated iteration's stall report (planner.stalls), as JSON

    @property
    def x_bound(self) -> float | None:
        """Simulated time over its lower bound: 1.00 is as fast as any plan could be."""
        return self.sim_s / self.bound_s if self.bound_s else None

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
                 f"{r.h2d_bytes / MiB:.1f}", f"{r.d2h_bytes / MiB:.1f}", f"{r.device_bytes / MiB:.1f}"]
        out.append(line)
    headers = ["policy", "sim s/iter"] + (["real s/iter"] if measured else []) + [
        "samples/s", "vs ideal", "x bound", "H2D MiB", "D2H MiB", "device MiB"]
    note = ("samples/s from measured time" if measured else "samples/s from simulated time (nothing executed)")
    note += "; x bound: simulated time over the lower bound for its order and budget"
    return tabulate(out, headers=headers, disable_numparse=True) + f"\n({note})"


def rows_to_json(rows: list[PolicyRow]) -> list[dict]:
    return [dict(asdict(r), samples_per_s=r.samples_per_s(), x_bound=r.x_bound) for r in rows]
