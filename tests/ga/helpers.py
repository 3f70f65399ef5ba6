"""Shared test inputs for the genetic search: graphs, contexts, budgets, hypothesis strategies."""
from __future__ import annotations

import functools

import numpy as np
from hypothesis import strategies as st

from engine.profile import analytic_profile
from ga.context import GraphContext
from planner.budget import Budget, make_budget
from planner.facts import GraphFacts
from zoo import small

PROFILE = analytic_profile("v100")


@functools.lru_cache(maxsize=None)
def lstm():
    """The conftest's small LSTM (239 nodes, 8 tensor sizes)."""
    return small.lstm(batch=4, steps=4, features=8, hidden=8, layers=2, classes=3)


@functools.lru_cache(maxsize=None)
def lstm_context() -> GraphContext:
    return GraphContext.from_graph(lstm())


def tight_budget(g) -> int:
    """The smallest budget that runs every operator of ``g`` (the planner's minimal allocation
    plus operator scratch), in device bytes."""
    return GraphFacts(g).smallest_budget


def budget_of(g, device_bytes: int) -> tuple[GraphFacts, Budget]:
    """The facts of ``g`` in its default order and the budget of ``device_bytes`` for it."""
    facts = GraphFacts(g)
    return facts, make_budget(facts, int(device_bytes))


@st.composite
def dags(draw, max_nodes: int = 40):
    """(num_nodes, edges) of a random DAG: edges go from lower to higher ids, shuffled labels."""
    n = draw(st.integers(1, max_nodes))
    density = draw(st.floats(0.0, 0.5))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    label = rng.permutation(n)
    edges = [(int(label[u]), int(label[v])) for u in range(n) for v in range(u + 1, n)
             if rng.random() < density]
    return n, edges
