"""A first compile is announced, never a warm call (issue 38: a first run is never silent)."""
import threading
from types import SimpleNamespace

from planner import first_compile
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


def test_the_simulator_and_the_swap_pass_run_inside_the_notice(monkeypatch):
    """Planning a model calls both compiled functions through ``announced``, naming each."""
    import contextlib

    import zoo
    from planner import dispatch, swap_planner
    from planner.policy import plan_with
    from engine.profile import analytic_profile
    from planner.simulate import simulate

    wrapped = []

    @contextlib.contextmanager
    def recording(dispatcher, what, say=None):
        wrapped.append((dispatcher, what))
        yield

    monkeypatch.setattr(dispatch, "announced", recording)
    monkeypatch.setattr(swap_planner, "announced", recording)
    g = zoo.tiny("rnn")
    from engine.liveness import peak_bytes

    simulate(plan_with("swapadvisor", g, peak_bytes(g) // 2), g, analytic_profile("v100"))
    assert (swap_planner.swap_scan.scan, "the planner's swap pass") in wrapped
    assert (dispatch._dispatch, "the simulator") in wrapped
