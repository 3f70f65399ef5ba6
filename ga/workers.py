"""Evaluation in worker processes.

``ProcessWorkers(make_state, state_args, workers)``: ``workers`` processes, each of which
builds its state once (``make_state(*state_args)``, e.g. a Breeder over the graph and
profile) when it starts; tasks then carry only their own data. ``map(fn, items,
deadline)`` returns ``fn(state, item)`` for each item, in the items' order, so results never
depend on which worker finished first. With ``workers <= 1`` everything runs in-process.
Workers ignore SIGINT, so Ctrl-C reaches only the searching process, and take SIGTERM's default
action whatever handler they inherited: ``Pool.terminate`` (the deadline) stops workers with
SIGTERM and then waits for them. An inherited Python handler (Ray's driver installs one; a
training loop's stop-at-boundary only records the signal) runs in the main thread, which is
blocked on the task queue; when the kernel hands the signal to another thread of the worker
(numba's), nothing wakes the main thread, the worker never exits and the search hangs.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import time
from typing import Any, Callable, Sequence


def default_workers() -> int:
    """All cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


_STATE: Any = None


def _init_worker(make_state: Callable, state_args: tuple) -> None:
    global _STATE
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
    _STATE = make_state(*state_args)


def _call(job):
    fn, item = job
    return fn(_STATE, item)


class DeadlineReached(Exception):
    """``ProcessWorkers.map`` ran out of time; ``results`` holds what finished, in order."""

    def __init__(self, results: list):
        super().__init__(f"deadline reached after {len(results)} results")
        self.results = results


class ProcessWorkers:
    """``workers`` processes (fork where the platform has it, else spawn), each holding
    ``make_state(*state_args)``; or, with ``workers <= 1``, that state in this process."""

    def __init__(self, make_state: Callable, state_args: tuple, workers: int | None = None,
                 start_method: str | None = None):
        self.workers = default_workers() if workers is None else int(workers)
        self._processes = None
        if self.workers <= 1:
            self.state = make_state(*state_args)
            return
        if start_method is None:
            start_method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        ctx = multiprocessing.get_context(start_method)
        self._processes = ctx.Pool(self.workers, initializer=_init_worker, initargs=(make_state, state_args))

    def map(self, fn: Callable, items: Sequence, deadline: float | None = None) -> list:
        """``[fn(state, item) for item in items]``, in order. Past ``deadline`` (time.monotonic)
        raises DeadlineReached with the results that finished before it, in order."""
        results: list = []
        if self._processes is None:
            for item in items:
                if deadline is not None and time.monotonic() >= deadline:
                    raise DeadlineReached(results)
                results.append(fn(self.state, item))
            return results
        it = self._processes.imap(_call, [(fn, item) for item in items], chunksize=1)
        for _ in range(len(items)):
            if deadline is None:
                results.append(it.next())
                continue
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise multiprocessing.TimeoutError
                results.append(it.next(timeout=left))
            except multiprocessing.TimeoutError:
                self.terminate()
                raise DeadlineReached(results) from None
        return results

    @property
    def alive(self) -> bool:
        """False once the processes were terminated (as a deadline does): ``map`` would then fail."""
        return self._processes is not None or self.workers <= 1

    def terminate(self) -> None:
        if self._processes is not None:
            self._processes.terminate()
            self._processes.join()
            self._processes = None

    def close(self) -> None:
        if self._processes is not None:
            self._processes.close()
            self._processes.join()
            self._processes = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.terminate()
