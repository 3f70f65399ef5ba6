import numpy as np
import pytest

from engine.program import COMPUTE, SWAP_IN
from planner.dispatch import Deadlock, run_streams

from .test_stream_order import PROFILE, toy


def test_in_order_streams_wait_for_their_predecessor_and_priority_streams_do_not():
    g, p = toy()
    secs = np.ones(2)
    start, _, order = run_streams(p, g, PROFILE, secs)
    assert order == [0, 1, 2, 3] and start.tolist() == [0.0, 1.0, 2.0, 3.0]
    # copies by priority: y (index 2) is ready at 0 and goes first; compute stays in order
    start, _, order = run_streams(p, g, PROFILE, secs, np.array([0, 2, 1, 3]), in_order=(COMPUTE,))
    assert [i for i in order if p.instrs[i].kind == SWAP_IN] == [2, 1]
    assert start.tolist() == [0.0, 1.0, 0.0, 1.0]


def test_contradicting_edges_deadlock():
    g, p = toy()
    p.instrs[0].deps = [3]               # r0 waits for r1, which runs after it on the stream
    with pytest.raises(Deadlock):
        run_streams(p, g, PROFILE, np.ones(2))
