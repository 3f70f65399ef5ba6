"""Saying so while numba compiles: the swap pass and the simulator are compiled on first use
(minutes on a small machine; numba then caches them in the user's cache folder,
planner/numba_cache.py), and a first run must not sit silent meanwhile (issue 38).
``announced`` wraps a call to a compiled function: when the function has nothing compiled or
loaded in this process yet and the call is still running after ``AFTER_S`` seconds, a line goes
to stderr, and another every ``EVERY_S`` seconds until it returns. A cached function loads in well
under ``AFTER_S``, so warm runs print nothing; nor do interpreted ones (engine/cli/first_run.py)."""
from __future__ import annotations

from contextlib import contextmanager

from engine.heartbeat import heartbeat, to_stderr

AFTER_S = 5.0
EVERY_S = 15.0


@contextmanager
def announced(dispatcher, what: str, say=to_stderr):
    """Run the body (a call of numba ``dispatcher``), announcing a first compile of ``what``
    through ``say`` (a line to stderr)."""
    if getattr(dispatcher, "overloads", None) or not hasattr(dispatcher, "overloads"):
        yield           # already compiled or loaded here, or a plain function (numba's DISABLE_JIT)
        return
    with heartbeat(lambda s: f"compiling {what} (first run only; numba caches it) ... {s:.0f} s", AFTER_S, EVERY_S, say):
        yield
