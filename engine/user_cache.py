"""Where the engine keeps what it builds once per user: numba's compiled planner
(planner/numba_cache.py) and the marks of the first-run compile (engine/cli/first_run.py)."""
from __future__ import annotations

import os


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
