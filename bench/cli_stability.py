"""Can a person trust `python -m engine.train` on a CPU, and does Ctrl-C lose nothing?

Two measurements, each with its verdict against issue 15's "Done when":

- ``--runs N`` (default 5): the default command N times in a row, each a fresh process with
  ``--json``; per policy, every run's measured s/iter within +-20% of the policies' median
  over the runs, swapadvisor never more than 10% faster than ideal (it cannot beat the plan
  with unlimited memory), and each run's wall time (the README says under a minute).
- ``--ctrl-c N`` (default 30): N runs of the issue's repro (small-cnn, swapadvisor, no search)
  sent SIGINT at a random moment of training; every checkpoint must equal the numpy reference
  at the iteration it records. Then a chain of three interrupts and resumes must end
  bit-identical to an uninterrupted run. Timing does not matter for this part.

    python -m bench.cli_stability --save                 # both (on an idle machine: ~6 min)
    python -m bench.cli_stability --runs 5 --ctrl-c 0    # timings only
    python -m bench.cli_stability --runs 0 --ctrl-c 30   # interrupts only

Run it from the clone's root (bench/ is not installed). ``--save`` writes
bench/results/cli_stability_<date>.txt (``_timings`` or ``_ctrl_c`` when one part is off) with
the machine and the date.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone

import numpy as np

TOLERANCE = 0.20          # each run's s/iter within +-20% of the median
SWAPADVISOR_EDGE = 0.10   # swapadvisor may not be more than 10% faster than ideal
CTRL_C = ["--model", "small-cnn", "--policy", "swapadvisor", "--search-seconds", "0", "--iterations", "390",
          "--no-check", "--quiet", "--backend", "cpu"]


def _engine(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.train", *args], capture_output=True, text=True, **kw)


# ---------------------------------------------------------------------- timings
def timing_runs(n: int, extra: list[str], work: str) -> tuple[list[str], bool]:
    lines, reports, walls = [], [], []
    for i in range(n):
        path = os.path.join(work, f"run{i}.json")
        t0 = time.perf_counter()
        done = _engine(["--json", path, "--out", os.path.join(work, "runs", f"run{i}"), *extra])
        walls.append(time.perf_counter() - t0)
        if done.returncode != 0:
            lines.append(f"run {i + 1}: exit {done.returncode}: {done.stderr.strip()[-300:]}")
            return lines, False
        reports.append(json.load(open(path)))
    if not reports:
        return lines, True
    policies = [p["policy"] for p in reports[0]["policies"]]
    real = {p: [next(x["real_s"] for x in r["policies"] if x["policy"] == p) for r in reports] for p in policies}
    sim = {p: reports[0]["policies"][k]["sim_s"] for k, p in enumerate(policies)}
    lines.append(f"{n} runs of: python -m engine.train {' '.join(extra)}".rstrip())
    lines.append(f"profile: {reports[0]['profile']}; budget {reports[0]['budget_bytes']} B of peak "
                 f"{reports[0]['peak_bytes']} B")
    lines.append(f"{'policy':12s} {'sim s/iter':>10s} {'median real':>11s}  real s/iter per run"
                 f"{'':30s} worst vs median")
    ok = True
    for p in policies:
        med = statistics.median(real[p])
        worst = max(abs(x / med - 1) for x in real[p])
        ok &= worst <= TOLERANCE
        lines.append(f"{p:12s} {sim[p]:10.4f} {med:11.4f}  {' '.join(f'{x:.4f}' for x in real[p]):48s} "
                     f"{worst:+.0%}{'' if worst <= TOLERANCE else '  OVER +-20%'}")
    if "ideal" in real and "swapadvisor" in real:
        ratios = [s / i for s, i in zip(real["swapadvisor"], real["ideal"])]
        fastest = min(ratios)
        ok &= fastest >= 1 - SWAPADVISOR_EDGE
        lines.append(f"swapadvisor / ideal per run: {' '.join(f'{r:.2f}' for r in ratios)} (never below "
                     f"{1 - SWAPADVISOR_EDGE:.2f}: {'held' if fastest >= 1 - SWAPADVISOR_EDGE else 'NOT HELD'})")
    lines.append(f"wall seconds per run (README: under a minute): {' '.join(f'{w:.1f}' for w in walls)}; "
                 f"max {max(walls):.1f} ({'held' if max(walls) < 60 else 'NOT HELD'})")
    ok &= max(walls) < 60
    return lines, ok


# ---------------------------------------------------------------------- Ctrl-C
def _reference(iterations: list[int]) -> dict[int, dict[str, np.ndarray]]:
    """The numpy reference's state at each iteration asked for (one run, snapshots)."""
    from engine.library.models import model_graph
    from engine.training import Trainer

    g = model_graph(CTRL_C[CTRL_C.index("--model") + 1])     # CTRL_C's model, at its defaults
    tr = Trainer(g, seed=0)
    out = {}
    for it in sorted(set(iterations)):
        while tr.iteration < it:
            tr.step()
        out[it] = tr.named_state()
    return out


def _interrupted(ck: str, delay_s: float, resume: bool) -> tuple[int, int | None]:
    """Start a run and SIGINT it ``delay_s`` after its plan line (training starts right
    after); (exit status, the checkpoint's iteration or None)."""
    args = CTRL_C + ["--checkpoint", ck, "--checkpoint-every", "100000", "--out", os.path.dirname(ck),
                     "--overwrite"]        # one folder for the whole series of interrupted runs
    if resume:
        args += ["--resume", ck]
    # The run gets Ctrl-C's default even when this bench was started with SIGINT ignored (a
    # script's background job), which the child would inherit and the engine respects.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "engine.train", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, before)
    for line in proc.stdout:
        if line.startswith("plan   "):
            break
    time.sleep(delay_s)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=300)
    if proc.returncode != 130 or not os.path.exists(ck):     # ended first, or stopped before training
        return proc.returncode, None
    with np.load(ck) as z:
        return 130, json.loads(str(z["__header__"]))["iteration"]


def _state(ck: str) -> dict[str, np.ndarray]:
    with np.load(ck) as z:
        return {k[2:]: z[k] for k in z.files if k.startswith("t/")}


def ctrl_c_trials(n: int, work: str, seed: int = 15) -> tuple[list[str], bool]:
    rng = random.Random(seed)
    results = []
    for i in range(n):
        ck = os.path.join(work, f"ctrlc{i}.npz")
        code, it = _interrupted(ck, rng.uniform(0.5, 4.0), False)
        results.append((ck, code, it))
    stopped = [it for _, code, it in results if it is not None]
    refs = _reference(stopped)
    mixed = [(ck, it) for ck, code, it in results if it is not None
             and not all(np.array_equal(a, refs[it][k]) for k, a in _state(ck).items())]
    finished = [code for _, code, it in results if it is None]
    lines = [f"{n} Ctrl-C trials of: python -m engine.train {' '.join(CTRL_C)} --checkpoint K "
             f"(SIGINT 0.5-4 s into training)",
             f"stopped at iterations: {' '.join(str(x) for x in stopped)}",
             f"checkpoints equal to the reference at their recorded iteration: {len(stopped) - len(mixed)} of "
             f"{len(stopped)}" + (f"; MIXED: {mixed}" if mixed else "")
             + (f"; {len(finished)} runs ended before the signal (exit {finished})" if finished else "")]
    ok = not mixed and not finished
    # A chain: three interrupts and resumes, then to the end; compare with the reference's end.
    ck = os.path.join(work, "chain.npz")
    chain = []
    for k in range(3):
        code, it = _interrupted(ck, rng.uniform(0.5, 3.0), k > 0)
        chain.append(it)
    done = _engine(CTRL_C + ["--checkpoint", ck, "--resume", ck, "--out", work, "--overwrite"])
    final = _reference([390])[390]
    same = done.returncode == 0 and all(np.array_equal(a, final[k]) for k, a in _state(ck).items())
    lines.append(f"chain: interrupted at {chain}, resumed to 390: bit-identical to an uninterrupted run: "
                 f"{'yes' if same else 'NO'}")
    return lines, ok and same


def machine() -> str:
    from bench.results_file import cpu_name

    cpu = cpu_name()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return (f"{cpu}, {os.cpu_count()} cores, load average {load} at start; Python {platform.python_version()}, "
            f"numpy {np.__version__}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cli_stability", description=__doc__.split("\n\n")[0],
                                allow_abbrev=False)
    p.add_argument("--runs", type=int, default=5, help="timed runs of the default command (default 5)")
    p.add_argument("--ctrl-c", type=int, default=30, help="Ctrl-C trials (default 30)")
    p.add_argument("--args", default="", help="extra engine.train flags for the timed runs, quoted")
    p.add_argument("--save", action="store_true", help="write bench/results/cli_stability_<date>.txt")
    a = p.parse_args(argv)
    if not os.path.isdir("bench"):
        print("run it from the clone's root: bench/ is not installed", file=sys.stderr)
        return 2
    lines = [f"cli_stability, {datetime.now(timezone.utc).isoformat(timespec='minutes')}", machine(), ""]
    ok = True
    with tempfile.TemporaryDirectory() as work:
        if a.runs:
            part, good = timing_runs(a.runs, a.args.split(), work)
            lines += part + [f"timings: {'held' if good else 'NOT HELD'}", ""]
            ok &= good
        if a.ctrl_c:
            part, good = ctrl_c_trials(a.ctrl_c, work)
            lines += part + [f"Ctrl-C: {'held' if good else 'NOT HELD'}", ""]
            ok &= good
    text = "\n".join(lines)
    print(text)
    if a.save:
        from bench.results_file import save_results
        name = "cli_stability" + ("" if a.runs and a.ctrl_c else "_timings" if a.runs else "_ctrl_c")
        print(f"saved to {save_results(name, text + chr(10))}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
