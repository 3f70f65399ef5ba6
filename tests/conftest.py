"""Shared fixtures: a small LSTM training graph and a program planned at its smallest budget;
Ctrl-C handled as in a terminal for the whole run."""
import os
import signal

import pytest

from planner.allocation import simple_allocation
from planner.budget import make_budget
from planner.facts import GraphFacts
from planner.swap_planner import plan
from zoo import small

# A `python -m engine.train` started by a test compiles what it needs itself, never planning
# interpreted while a compile runs in the background (engine/cli/first_run.py): the tests that
# exercise that choose it themselves.
os.environ["SWAPENGINE_COMPILE"] = "wait"


@pytest.fixture(scope="session")
def lstm_graph():
    return small.lstm(batch=4, steps=4, features=8, hidden=8, layers=2, classes=3)


@pytest.fixture(scope="session")
def tight_program(lstm_graph):
    """A program at the smallest budget: plenty of swaps and reuse to break. Returns the
    program and the budget's device bytes (what ``verify`` bounds the arena by)."""
    g = lstm_graph
    facts = GraphFacts(g)
    budget = make_budget(facts, facts.smallest_budget)
    return plan(g, facts.order, simple_allocation(facts, budget), budget.scratch_bytes), budget.device_bytes


@pytest.fixture(scope="session", autouse=True)
def ctrl_c_as_in_a_terminal():
    """Python's own SIGINT handler for the whole run, and so Ctrl-C's default for the commands the
    tests start: a suite started as a background job without job control inherits SIGINT
    ignored, which the engine respects (engine/interrupts.py), and the tests that stop a run
    with SIGINT would then wait for a signal that never comes."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)
