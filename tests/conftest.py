"""Shared fixtures: a small LSTM training graph and a program planned at its smallest budget."""
import pytest

from planner.allocation import simple_allocation, size_demand, smallest_budget
from planner.swap_planner import plan
from zoo import small


@pytest.fixture(scope="session")
def lstm_graph():
    return small.lstm(batch=4, steps=4, features=8, hidden=8, layers=2, classes=3)


@pytest.fixture(scope="session")
def tight_program(lstm_graph):
    """A program at the smallest budget: plenty of swaps and reuse to break."""
    g = lstm_graph
    order = g.default_order()
    budget = smallest_budget(size_demand(g, order))
    return plan(g, order, simple_allocation(g, order, budget)), budget
