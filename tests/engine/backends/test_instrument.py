"""engine/backends/instrument.Instrumented, on a device that only records what it is asked to issue:
the sanitizer's delay and poison before each instruction (not an in-place update's input), timing
events around it converted to seconds after the start, and captures (none while sanitizing; a timed
replay issued again, or captured again where the device's capture keeps events)."""
from types import SimpleNamespace

import numpy as np

from engine.backends.instrument import POISON, Instrumented
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT


class Recorder:
    """A device whose primitives log themselves; events carry the time of their recording."""
    name, device_name, host_calls = "recorder", "", True

    def __init__(self, timed_capture=False):
        self.log, self.now, self.timed_capture = [], 0.0, timed_capture

    def __getattr__(self, primitive):
        return lambda *args, **kw: self.log.append((primitive, *args))

    def record(self, stream, timed=False):
        self.now += 1.0
        self.log.append(("record", stream, timed))
        return SimpleNamespace(t=self.now)

    def elapsed(self, start, end):
        return end.t - start.t

    def capture(self, issue):
        self.log.append(("capture",))
        issue()
        return "graph"


def node(nid=3):
    return SimpleNamespace(op="relu", attrs={}, id=nid)


def test_the_sanitizer_delays_each_instruction_and_poisons_what_it_overwrites():
    dev = Recorder()
    be = Instrumented(dev, sanitize=True, seed=1, jitter_s=(1e-3, 2e-3, 0.0))
    x, y = np.zeros(4, np.float32), np.zeros(4, np.float32)
    be.launch(COMPUTE, node(), [x], [y])
    be.launch(COMPUTE, node(), [y], [y])            # in place: its input is not poisoned
    be.copy_h2d(SWAP_IN, x, y)
    be.copy_d2h(SWAP_OUT, y, x)                     # jitter 0 on swap-out: no delay
    kinds = [entry[0] for entry in dev.log]
    assert kinds == ["delay", "fill", "launch", "delay", "launch", "delay", "fill", "copy_h2d", "copy_d2h"]
    delays = [entry for entry in dev.log if entry[0] == "delay"]
    assert [d[1] for d in delays] == [COMPUTE, COMPUTE, SWAP_IN] and all(0 <= d[2] <= 2e-3 for d in delays)
    assert dev.log[1] == ("fill", COMPUTE, y, POISON) and dev.log[6] == ("fill", SWAP_IN, x, POISON)
    assert be.capture(lambda: None) is None          # fresh delays every iteration: nothing captured


def test_timing_brackets_each_instruction_in_seconds_after_the_start():
    dev = Recorder()
    be = Instrumented(dev)
    x = np.zeros(4, np.float32)
    be.launch(COMPUTE, node(), [x], [x])             # not timed yet
    be.timings = []                                  # the reference event: t = 1
    be.launch(COMPUTE, node(7), [x], [x])            # t = 2, 3
    be.copy_d2h(SWAP_OUT, x, x)                      # t = 4, 5
    assert be.timings == []                          # handed over at synchronize
    be.synchronize()
    assert be.timings == [(COMPUTE, 7, 1.0, 2.0), (SWAP_OUT, 16, 3.0, 4.0)]
    assert not any(entry[0] in ("delay", "fill") for entry in dev.log)


def test_a_timed_replay_is_issued_again_or_captured_again_with_its_events():
    for timed_capture, replayed in ((False, []), (True, [("capture",), ("replay", "graph")])):
        dev = Recorder(timed_capture)
        be = Instrumented(dev)
        issued = []
        graph = be.capture(lambda: issued.append(1))
        assert graph.graph == "graph" and issued == [1]
        be.replay(graph)                             # untimed: the device replays its graph
        assert dev.log[-1] == ("replay", "graph") and issued == [1]
        be.timings = []
        dev.log.clear()
        be.replay(graph)
        assert issued == [1, 1] and [e for e in dev.log if e[0] in ("capture", "replay")] == replayed
