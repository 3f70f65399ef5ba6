"""Fitness: plan + simulate, in seconds per iteration; and evaluation in worker processes.

- ``Evaluator(graph, profile, pool_budget)``: ``time(schedule, allocation)`` runs the swap planner
  and the simulator and returns the simulated iteration time; ``inf`` for an allocation over
  the budget or one the planner cannot run (``PlanError``).
- ``WorkerPool(make_state, state_args, workers)``: a process pool in which every worker
  builds its state once (``make_state(*state_args)``, e.g. an Evaluator over the graph and
  profile) in the pool's initializer; tasks then carry only their own data. ``map(fn, items,
  deadline)`` returns ``fn(state, item)`` for each item, in the items' order, so results never
  depend on which worker finished first. With ``workers <= 1`` everything runs in-process.
  Workers ignore SIGINT, so Ctrl-C reaches only the searching process.
"""
from __future__ import annotations

import math
import multiprocessing
import os
import signal
import time
from typing import Any, Callable, Sequence

import numpy as np

from allocator import Allocation
from engine.ir import Graph
from engine.profile import Profile
from planner.simulate import simulate
from planner.swap_planner import PlanError, plan


class Evaluator:
    """Per-graph inputs of plan + simulate, computed once."""

    def __init__(self, graph: Graph, profile: Profile, pool_budget: int, node_seconds: np.ndarray | None = None):
        """``pool_budget``: bytes for the allocation's objects; plan() adds operator scratch."""
        self.graph, self.profile, self.budget = graph, profile, int(pool_budget)
        self.node_seconds = profile.node_seconds(graph) if node_seconds is None else node_seconds
        self.link = profile.link.h2d_bytes_per_s

    def program(self, schedule: Sequence[int], allocation: Allocation):
        """The planned Program (PlanError if the allocation cannot run the graph)."""
        return plan(self.graph, [int(v) for v in schedule], allocation, self.node_seconds, self.link)

    def time(self, schedule: Sequence[int], allocation: Allocation) -> float:
        """Simulated seconds per iteration; inf if over budget or not plannable."""
        if allocation.pool_bytes > self.budget:
            return math.inf
        try:
            program = self.program(schedule, allocation)
        except PlanError:
            return math.inf
        return float(simulate(program, self.graph, self.profile, self.node_seconds).total)


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
    _STATE = make_state(*state_args)


def _call(job):
    fn, item = job
    return fn(_STATE, item)


class DeadlineReached(Exception):
    """``WorkerPool.map`` ran out of time; ``results`` holds what finished, in order."""

    def __init__(self, results: list):
        super().__init__(f"deadline reached after {len(results)} results")
        self.results = results


class WorkerPool:
    """``workers`` processes (fork where the platform has it, else spawn), each holding
    ``make_state(*state_args)``; or, with ``workers <= 1``, that state in this process."""

    def __init__(self, make_state: Callable, state_args: tuple, workers: int | None = None,
                 start_method: str | None = None):
        self.workers = default_workers() if workers is None else int(workers)
        self._pool = None
        if self.workers <= 1:
            self.state = make_state(*state_args)
            return
        if start_method is None:
            start_method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        ctx = multiprocessing.get_context(start_method)
        self._pool = ctx.Pool(self.workers, initializer=_init_worker, initargs=(make_state, state_args))

    def map(self, fn: Callable, items: Sequence, deadline: float | None = None) -> list:
        """``[fn(state, item) for item in items]``, in order. Past ``deadline`` (time.monotonic)
        raises DeadlineReached with the results that finished before it, in order."""
        results: list = []
        if self._pool is None:
            for item in items:
                if deadline is not None and time.monotonic() >= deadline:
                    raise DeadlineReached(results)
                results.append(fn(self.state, item))
            return results
        it = self._pool.imap(_call, [(fn, item) for item in items], chunksize=1)
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

    def terminate(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool.join()
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.terminate()
