"""A line now and then while something long runs: the command line must not sit silent (a
first compile, a policy planning a large graph). ``heartbeat`` runs its body; if the body is
still running after ``after_s`` seconds, ``say(line(elapsed seconds))``, and again every
``every_s`` seconds until it returns. A body that returns sooner prints nothing."""
from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable


def to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextmanager
def heartbeat(line: Callable[[float], str], after_s: float, every_s: float, say: Callable[[str], None] = to_stderr):
    done = threading.Event()
    start = time.monotonic()

    def beat():
        wait = after_s
        while not done.wait(wait):
            say(line(time.monotonic() - start))
            wait = every_s

    thread = threading.Thread(target=beat, name="heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
