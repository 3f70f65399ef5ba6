"""The README's first command, first run against the runs after it (issue 38's "Done when": the first
`python -m engine.train` within 2x of the second, the compile announced).

From an empty numba cache (a fresh NUMBA_CACHE_DIR), the default command runs once (it plans
interpreted while ``engine.warmup`` compiles in the background: engine/cli/first_run.py); the bench
waits for that compile, then runs the command again, compiled. Each run's CPU seconds (its own and
its search workers', from wait4), wall time and peak RSS; the search's candidates and the plan's
simulated time; the background compile's own report line.

    python -m bench.first_run [--save]          # from the clone's root, on an idle machine
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

from tabulate import tabulate

from bench.results_file import Transcript, cpu_name, save_results
from engine.user_cache import compile_log_file, compile_under_way


def timed_run(env: dict, out: str) -> dict:
    """One ``python -m engine.train --out OUT``: its CPU seconds (with its waited-for children),
    wall seconds, peak RSS and output."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "engine.train", "--out", out], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    text = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    search = re.search(r"search .*?(\d+) candidates", text)
    plan = re.search(r"plan   swapadvisor .* simulated ([0-9.]+) s/iter", text)
    return {"status": proc.returncode, "cpu": usage.ru_utime + usage.ru_stime, "wall": time.monotonic() - start,
            "rss_mib": usage.ru_maxrss / 1024, "candidates": search.group(1) if search else "",
            "sim": plan.group(1) if plan else "", "text": text}


def wait_for_background(timeout_s: float = 1800) -> float:
    """Seconds waited until no compile holds the lock (the background ``engine.warmup``)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if compile_under_way() is None:
            return time.monotonic() - start
        time.sleep(1)
    raise TimeoutError(f"the background compile still runs after {timeout_s:.0f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.first_run", description=__doc__.splitlines()[0])
    ap.add_argument("--save", action="store_true", help="write bench/results/first_run_<date>.txt")
    a = ap.parse_args(argv)
    say = Transcript()
    with tempfile.TemporaryDirectory(prefix="first-run-") as work:
        env = {k: v for k, v in os.environ.items() if k not in ("SWAPENGINE_COMPILE", "NUMBA_DISABLE_JIT")}
        env["NUMBA_CACHE_DIR"] = os.environ["NUMBA_CACHE_DIR"] = os.path.join(work, "numba")
        say(f"# python -m engine.train from an empty numba cache, then again; "
            f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M')} UTC")
        say(f"# machine: {platform.platform()}, {os.cpu_count()} cores: {cpu_name()}; load average "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at start")
        first = timed_run(env, os.path.join(work, "run1"))
        waited = wait_for_background()
        second = timed_run(env, os.path.join(work, "run2"))
        rows = [[name, r["status"], f"{r['cpu']:.1f}", f"{r['wall']:.1f}", f"{r['rss_mib']:.0f}", r["candidates"],
                 r["sim"]] for name, r in (("first", first), ("second", second))]
        say(tabulate(rows, headers=["run", "exit", "CPU s", "wall s", "peak RSS MiB", "search candidates",
                                    "swapadvisor sim s/iter"], disable_numparse=True))
        notice = next((line for line in first["text"].splitlines() if line.startswith("first run:")), "NONE")
        say(f"first run's notice: {notice}")
        log = open(compile_log_file()).read().strip().splitlines() if os.path.exists(compile_log_file()) else []
        say(f"background compile (waited {waited:.0f} s after the first run): {log[-1] if log else 'no log'}")
        ratio = first["cpu"] / second["cpu"]
        say(f"first / second: {ratio:.2f}x in CPU seconds (issue 38's target: within 2x): "
            f"{'held' if ratio <= 2 else 'NOT HELD'}")
        bad = [r for r in (first, second) if r["status"] != 0]
        for r in bad:
            say(r["text"][-2000:])
    if a.save:
        print("saved", save_results("first_run", say.text()))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
