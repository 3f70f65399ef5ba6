"""The first `python -m engine.train` without minutes of compiling (issue 38).

numba compiles the planner's swap pass and simulator on first use: about 2.5 CPU-minutes and
1.4 GB on a 2-core machine, then cached once per user (planner/numba_cache.py). A first run that
waited for that took 10x its warm time. Instead, until the cache is known to hold the compile (a
ready mark that ``python -m engine.warmup`` writes when it has compiled everything), a run plans
with the same functions interpreted (numba's DISABLE_JIT: the same plans,
tests/planner/test_interpreted_plans.py; about 100x slower a plan, which a small model does not
notice and a time-limited search pays for in candidates) while a detached ``engine.warmup``
compiles them for the runs after it. A model too large to plan interpreted re-executes the
command waiting for that compile instead.

The decision is made before the planner is imported (numba reads DISABLE_JIT as it decorates),
by ``choose_tier`` in engine/train.py; ``settle`` starts the background compile once the model is
built, so a refused command line or ``--help`` starts nothing. SWAPENGINE_COMPILE=wait (what the
test suite sets) compiles in the run itself, or waits for a compile under way.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time

from engine.user_cache import CODE_ROOT as ROOT
from engine.user_cache import compile_lock_file as lock_file
from engine.user_cache import compile_log_file as log_file
from engine.user_cache import compile_under_way, numba_cache_dir

MODE_VARIABLE = "SWAPENGINE_COMPILE"
MODES = ("auto", "wait")
# The modules holding numba-compiled functions: their source is what the ready mark vouches for
# (tests/engine/cli/test_first_run.py checks this list against the code).
COMPILED_SOURCES = ("planner/dispatch.py", "planner/stream_order.py", "planner/swap_scan.py", "ga/locality.py",
                    "planner/reuse_edges.py")
# Beyond this many operators a model waits for the compiled planner: interpreted, one plan of the
# 9,631-operator RNN-8-8K takes 42 CPU-s against 0.26 compiled (and the default model has 77).
LARGEST_INTERPRETED = 1500
EVERY_S = 15.0

COMPILED, INTERPRETED, USER = "compiled", "interpreted", "user's NUMBA_DISABLE_JIT"
_tier: str | None = None        # set by choose_tier; None: in-process callers (tests, the API) compile


def to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def ready_mark() -> str:
    """The file that says the cache holds the compile of these sources with this numba, Python
    and CPU architecture."""
    h = hashlib.sha256()
    for part in (importlib.metadata.version("numba"), sys.version, platform.machine()):
        h.update(part.encode() + b"\0")
    for rel in COMPILED_SOURCES:
        with open(os.path.join(ROOT, rel), "rb") as f:
            h.update(f.read())
    return os.path.join(numba_cache_dir(), f"ready-{h.hexdigest()[:16]}.json")


def take_lock() -> bool:
    """Claim the compile for this process (False: another live one holds it). A lock left by a
    dead process is taken over. The lock appears with the pid already in it (a hard link to a
    file written first), so no reader sees it empty."""
    os.makedirs(numba_cache_dir(), exist_ok=True)
    mine = f"{lock_file()}.{os.getpid()}"
    with open(mine, "w") as f:
        f.write(str(os.getpid()))
    try:
        for _ in range(2):
            try:
                os.link(mine, lock_file())
                return True
            except FileExistsError:
                if compile_under_way() is not None:
                    return False
                try:
                    os.unlink(lock_file())      # stale: its process is gone
                except FileNotFoundError:
                    pass
        return False
    finally:
        os.unlink(mine)


def release_lock() -> None:
    try:
        with open(lock_file()) as f:
            mine = f.read().strip() == str(os.getpid())
        if mine:
            os.unlink(lock_file())
    except OSError:
        pass


def mark_ready(seconds: float) -> str:
    path = ready_mark()
    with open(path, "w") as f:
        json.dump({"numba": importlib.metadata.version("numba"), "compiled_in_s": round(seconds, 1),
                   "at": time.strftime("%Y-%m-%d %H:%M:%S")}, f)
    return path


def is_ready() -> bool:
    try:
        return os.path.exists(ready_mark())
    except OSError:
        return False


def _compile_environment() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}
    env[MODE_VARIABLE] = "wait"
    return env


def choose_tier(environ=os.environ, say=to_stderr) -> str:
    """Before the planner is imported: compiled or interpreted for this run. Interpreted when
    the compile is not ready and nothing asks for it now (the mode is auto, the user did not set
    NUMBA_DISABLE_JIT, the cache folder can be written)."""
    global _tier
    mode = environ.get(MODE_VARIABLE) or "auto"
    if mode not in MODES:
        say(f"warning: {MODE_VARIABLE}={mode} is not one of {', '.join(MODES)}; using auto")
        mode = "auto"
    if environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        _tier = USER
    elif is_ready():
        _tier = COMPILED
    elif mode == "wait":
        wait_for_compile(say)
        _tier = COMPILED
    else:
        try:
            os.makedirs(numba_cache_dir(), exist_ok=True)
            writable = os.access(numba_cache_dir(), os.W_OK)
        except OSError:
            writable = False
        _tier = INTERPRETED if writable else COMPILED
    if _tier == INTERPRETED:
        environ["NUMBA_DISABLE_JIT"] = "1"          # for search workers started by spawn
        from numba.core import config
        config.DISABLE_JIT = True
    return _tier


def wait_for_compile(say=to_stderr) -> None:
    """Return once no compile runs (it finished, or died: then this process compiles what it
    needs itself), saying so every EVERY_S seconds."""
    pid = compile_under_way()
    if pid is None:
        return
    start = time.monotonic()
    say(f"waiting for the planner's compile under way (pid {pid}; log {log_file()}) ...")
    next_line = start + EVERY_S
    mark = ready_mark()
    while compile_under_way() is not None and not os.path.exists(mark):
        time.sleep(0.5)
        if time.monotonic() >= next_line:
            say(f"waiting for the planner's compile (pid {pid}) ... {time.monotonic() - start:.0f} s")
            next_line += EVERY_S


def start_background_compile() -> int | None:
    """Start ``python -m engine.warmup --background``, detached, its output in ``log_file()``;
    its pid, or None where it could not be started."""
    try:
        os.makedirs(numba_cache_dir(), exist_ok=True)
        with open(log_file(), "w") as log:
            process = subprocess.Popen([sys.executable, "-m", "engine.warmup", "--background"],
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       env=_compile_environment(), start_new_session=True)
    except OSError:
        return None
    return process.pid


def settle(operators: int, say=to_stderr) -> None:
    """Once the model is built, before planning: an interpreted run starts the background compile
    (or joins one under way); a model of more than LARGEST_INTERPRETED operators re-executes this
    command to wait for the compile (or to compile) first."""
    if _tier != INTERPRETED:
        return
    if operators > LARGEST_INTERPRETED:
        say(f"first run: the planner is not compiled yet and {operators} operators are too many to plan "
            f"without it: compiling first (once per user; about 2.5 CPU-minutes on 2 cores)")
        sys.stdout.flush()
        argv = [sys.executable, *sys.orig_argv[1:]]
        os.execve(sys.executable, argv, _compile_environment())
    pid = compile_under_way() or start_background_compile()
    where = f"pid {pid}; log {log_file()}" if pid else f"it could not be started in {numba_cache_dir()}"
    say(f"first run: the planner compiles in the background for later runs ({where}; once per user, about "
        f"2.5 CPU-minutes on 2 cores); this run plans interpreted: the same plans, slower (a search sees fewer "
        f"candidates)")
