"""One BLAS thread while the CPU backend or the numpy reference computes.

The CPU backend runs kernels on three stream threads at once; numpy's BLAS (OpenBLAS, MKL)
would start a pool of its own threads inside each matrix product, so a 2-core machine runs
3 x cores threads and an iteration's time swings 60x with the load (issue 15: 0.013 to
0.76 s/iter for one command). Measured profiles inherit that noise, and the planner plans on
them. Limiting BLAS to one thread makes each stream one core's worth of work, as on a GPU
each stream is one queue.

threadpoolctl sets the limit. OpenBLAS keeps it process-wide but ignores a call made from
any thread but the main one (0.3.31, measured), and OpenMP builds keep it per thread; so the
CPU backend holds it in the thread that creates it (usually the main one) and again in each
stream thread, and the reference interpreter per iteration. The first holder saves the
original limits, the last one restores them: a library caller's numpy is left as it was.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy  # noqa: F401  (loads its BLAS, so the controller finds it)
from threadpoolctl import ThreadpoolController

_lock = threading.Lock()
_controller: ThreadpoolController | None = None      # built once: it scans the loaded libraries
_holders = 0
_first = None                                        # the limiter holding the original limits


def _limit():
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas")


@contextmanager
def one_blas_thread():
    """While held (by any thread), BLAS calls in the holding threads use one thread."""
    global _holders, _first
    with _lock:
        limiter = _limit()
        _holders += 1
        if _holders == 1:
            _first = limiter
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                _first.restore_original_limits()
                _first = None


def blas_threads() -> list[int]:
    """The thread counts of the loaded BLAS libraries (for tests and reports)."""
    with _lock:
        global _controller
        if _controller is None:
            _controller = ThreadpoolController()
        return [info["num_threads"] for info in _controller.select(user_api="blas").info()]
