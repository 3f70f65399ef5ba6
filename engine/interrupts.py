"""Stopping training between iterations, never inside one.

An iteration runs on the backend's stream threads; Ctrl-C raised in the main thread while
they work would leave the state half of iteration N and half of N+1, and a checkpoint saved
then would mix them. ``StopAtBoundary`` turns the first SIGINT (or SIGTERM) into a request
that the training loop reads between iterations, where the state is whole and a checkpoint
is exact. A second signal raises ``KeyboardInterrupt`` at once: the iteration in flight is
abandoned and nothing is saved from it (the last checkpoint on disk stays intact, since
checkpoints are written to a temporary file and renamed).

Signal handlers can only be installed from the main thread; elsewhere (a library caller's
worker thread) the context does nothing and the caller's own handling applies.
"""
from __future__ import annotations

import signal
import sys
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopAtBoundary:
    """Context manager: ``requested`` becomes the signal number once a stop is asked for."""

    def __init__(self, message: str = "stopping after this iteration (press Ctrl-C again to stop at once, "
                                      "saving nothing from it)"):
        self.message = message
        self.requested: int | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum, frame):
        if self.requested is not None:
            raise KeyboardInterrupt
        self.requested = signum
        print(f"\n{self.message}", file=sys.stderr, flush=True)

    def __enter__(self) -> "StopAtBoundary":
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                # A signal the process was started ignoring stays ignored, as Python itself
                # leaves it: a shell starts a background job without job control with SIGINT
                # ignored, because the terminal's Ctrl-C is not meant for it.
                if signal.getsignal(s) is not signal.SIG_IGN:
                    self._previous[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous.clear()

    @property
    def exit_status(self) -> int:
        """The shell's status for a run stopped by the requested signal (130 for SIGINT)."""
        return 128 + int(self.requested or signal.SIGINT)
