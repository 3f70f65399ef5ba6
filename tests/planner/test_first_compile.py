"""A first compile is announced, never a warm call (issue 38: a first run is never silent)."""
import threading
from types import SimpleNamespace

from planner import first_compile
from planner.dispatch import _dispatch
from planner.first_compile import announced


def test_a_slow_first_call_is_announced_until_it_returns(monkeypatch):
    monkeypatch.setattr(first_compile, "AFTER_S", 0.01)
    said, heard = [], threading.Event()

    def say(line):
        said.append(line)
        heard.set()

    with announced(SimpleNamespace(overloads={}), "the thing", say):
        assert heard.wait(60)            # the body outlasts AFTER_S: the notice comes
    count = len(said)
    assert said[0].startswith("compiling the thing (first run only")
    heard.clear()
    assert not heard.wait(0.05) and len(said) == count      # and stops once the call returned


def test_a_function_already_compiled_here_is_never_announced(monkeypatch):
    monkeypatch.setattr(first_compile, "AFTER_S", 0.0)
    said = []
    with announced(SimpleNamespace(overloads={"sig": object()}), "the thing", said.append):
        pass
    assert said == []


def test_the_simulator_is_wrapped():
    """run_arrays calls the compiled dispatcher inside the notice (numba's Dispatcher has overloads)."""
    assert hasattr(_dispatch, "overloads")
