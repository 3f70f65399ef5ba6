"""`python -m engine.warmup`: compile the planner's numba code now, once per user.

What the first `python -m engine.train` starts in the background (engine/cli/first_run.py); run in
the foreground it says what it does and how long it took. It plans the default model with the
default run's policies (the search briefly, in this process) and with window, smartswap and
capuchin, which compiles every specialisation those paths use into the user's cache
(planner/numba_cache.py), then writes the ready mark that lets later runs plan compiled. Anything a later run needs beyond that compiles on
first use, announced (planner/first_compile.py).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time

from . import first_run

PROG = "engine.warmup"
# The default model planned by the policies the default run uses, then by the others (separately:
# lms raises the budget for every policy planned beside it).
WORKLOADS = (["--policy", "ideal,odswap,swapadvisor", "--search-seconds", "2", "--workers", "1"],
             ["--policy", "window,smartswap,capuchin"])


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0].split(": ", 1)[1])
    ap.add_argument("--background", action="store_true",
                    help="as engine.train's first run starts it: exit at once if another compile is under way")
    return ap


def compile_planner() -> None:
    """Plan the workloads in this process (their output dropped; an error raises)."""
    from .run import main as train
    with tempfile.TemporaryDirectory(prefix="swapengine-warmup-") as out:
        for i, flags in enumerate(WORKLOADS):
            text = io.StringIO()
            with contextlib.redirect_stdout(text):
                status = train(["--simulate-only", "--quiet", "--out", os.path.join(out, str(i)), *flags])
            if status != 0:
                raise RuntimeError(f"planning {' '.join(flags)} ended with status {status}: {text.getvalue()[-500:]}")


def _cpu_seconds() -> float:
    """This process's CPU time and its finished children's (the search's worker)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    say = first_run.to_stderr
    from numba.core import config
    if config.DISABLE_JIT:
        say(f"{PROG}: NUMBA_DISABLE_JIT is set, so nothing compiles; unset it to compile the planner")
        return 2
    if first_run.is_ready():
        say(f"{PROG}: the planner is compiled already ({first_run.ready_mark()})")
        return 0
    while not first_run.take_lock():
        if args.background:
            return 0                    # another compile is under way: it will write the mark
        first_run.wait_for_compile(say)
        if first_run.is_ready():
            say(f"{PROG}: the planner is compiled ({first_run.ready_mark()})")
            return 0
    try:
        start = time.monotonic()
        cpu = _cpu_seconds()
        say(f"{PROG}: compiling the planner's swap pass and simulator (once per user; about 2.5 CPU-minutes "
            f"and 1.4 GB on 2 cores) ...")
        try:
            compile_planner()
        except KeyboardInterrupt:
            say(f"{PROG}: interrupted: the next engine.train starts the compile again in the background, or run this "
                "again")
            return 130
        except Exception as e:      # a bug of ours, said in one line; later runs try again
            say(f"{PROG}: compiling failed ({type(e).__name__}: {e}); runs compile what they need themselves")
            return 1
        path = first_run.mark_ready(time.monotonic() - start)
        say(f"{PROG}: compiled in {time.monotonic() - start:.0f} s ({_cpu_seconds() - cpu:.0f} CPU-s); "
            f"later runs plan with it ({path})")
    finally:
        first_run.release_lock()
    return 0


if __name__ == "__main__":
    sys.exit(main())
