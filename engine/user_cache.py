"""Where the engine keeps what it builds once per user: numba's compiled planner
(planner/numba_cache.py) and the marks of the first-run compile (engine/cli/first_run.py), and
whether that compile runs now."""
from __future__ import annotations

import os

# The folder holding engine/, planner/, ... (the clone's root, or site-packages once installed).
CODE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def numba_cache_dir() -> str:
    """NUMBA_CACHE_DIR where the user set it, else ``~/.cache/swapengine/numba`` (XDG_CACHE_HOME
    honoured)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return os.environ["NUMBA_CACHE_DIR"]
    return own_numba_cache_dir()


def own_numba_cache_dir() -> str:
    """The engine's own folder for numba's cache: ``~/.cache/swapengine/numba``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "swapengine", "numba")


def compile_lock_file() -> str:
    """Holds the pid of the ``engine.warmup`` compiling the planner now (engine/cli/first_run.py)."""
    return os.path.join(numba_cache_dir(), "compiling.pid")


def compile_log_file() -> str:
    """What a background ``engine.warmup`` printed."""
    return os.path.join(numba_cache_dir(), "compile.log")


def _alive(pid: int) -> bool:
    try:           # our own child (a re-executed run started it) that ended: reaped, not a zombie
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:         # another user's process: alive
        return True
    return True


def compile_under_way() -> int | None:
    """The pid of a compile (``engine.warmup``) holding the lock and running now, or None."""
    try:
        with open(compile_lock_file()) as f:
            pid = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return None
    return pid if pid > 0 and _alive(pid) else None
