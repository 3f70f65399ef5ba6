"""Policies that turn (graph, budget) into a Program without search.

- ``ideal``: no memory limit: every tensor gets its own object for as long as it
  lives, all state stays resident; the upper bound on throughput.
- ``odswap``: on-demand swapping as in the paper's Section 6.1 baseline: the
  default topological order, least-recently-used eviction when a size class is
  full, and prefetching learned from the first iteration (a swap-in starts as
  soon as its object is released, not when the compute stream reaches it; the
  paper ignores ODSwap's first iteration, and so do we by planning the steady
  state directly).
- ``swapadvisor``: the SwapAdvisor planner (Belady with a recency threshold)
  on a given schedule and allocation; without the search, the default order and
  the simple allocation.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from engine.ir import Graph

from .allocation import simple_allocation, unlimited_allocation
from .swap_planner import PlanOptions, plan

POLICIES = ("ideal", "odswap", "swapadvisor")


def make_program(policy: str, g: Graph, budget: int | None, node_seconds: np.ndarray | None = None,
                 link_bytes_per_s: float | None = None, schedule: Sequence[int] | None = None,
                 allocation=None):
    """Inputs: a policy name, the training graph, the pool budget in bytes (ignored by
    ideal), optional per-node seconds and link bandwidth (for the recency threshold), and
    for swapadvisor an optional schedule and allocation (found by the search).
    Output: the Program. Raises PlanError if the budget cannot run the graph."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy '{policy}' (known: {', '.join(POLICIES)})")
    order = g.default_order() if schedule is None else list(schedule)
    if policy == "ideal":
        return plan(g, g.default_order(), unlimited_allocation(g, g.default_order()), policy="ideal")
    if policy == "odswap":
        return plan(g, g.default_order(), simple_allocation(g, g.default_order(), budget),
                    options=PlanOptions(victim="lru"), policy="odswap")
    alloc = allocation if allocation is not None else simple_allocation(g, order, budget)
    return plan(g, order, alloc, node_seconds, link_bytes_per_s, policy="swapadvisor")
