"""A long body gets a line now and then, until it returns; a short one none (engine/heartbeat.py)."""
import threading

from engine.heartbeat import heartbeat


def test_a_body_past_after_s_hears_lines_with_the_elapsed_time_until_it_returns():
    said, heard = [], threading.Event()

    def say(line):
        said.append(line)
        heard.set()

    with heartbeat(lambda s: f"still at it ({s:.2f} s)", 0.01, 0.01, say):
        assert heard.wait(60)
        heard.clear()
        assert heard.wait(60)                 # and again every every_s
    count = len(said)
    assert count >= 2 and all(line.startswith("still at it (") for line in said)
    heard.clear()
    assert not heard.wait(0.05) and len(said) == count     # nothing once the body returned


def test_a_body_that_returns_before_after_s_hears_nothing():
    said = []
    with heartbeat(lambda s: "never", 60.0, 60.0, said.append):
        pass
    assert said == []
