"""engine.physical_bytes: an arena whose objects never share a byte takes the short way (no
runs); it answers every question as the runs do, and an arena with overlapping objects keeps
the runs."""
import numpy as np
import pytest

from engine.physical_bytes import PhysicalBytes
from engine.program import Arena


def with_runs(arena: Arena) -> PhysicalBytes:
    pb = PhysicalBytes(arena)
    pb._apart = False           # the general way, to compare with
    return pb


@pytest.mark.parametrize("seed", range(5))
def test_objects_apart_answer_as_the_runs_do(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 5, 12) * 256          # some objects hold no byte
    arena = Arena(np.concatenate(([0], np.cumsum(sizes)[:-1])), sizes, int(sizes.sum()))
    fast, slow = PhysicalBytes(arena), with_runs(arena)
    assert fast._apart
    for o in rng.integers(0, len(sizes), 60).tolist():
        assert fast.owners(o) == slow.owners(o)
        assert fast.take(o) == slow.take(o)
        other = int(rng.integers(0, len(sizes)))
        if other != o:
            assert fast.shares(o, other) == slow.shares(o, other) is False
        assert fast.sharing(o) == slow.sharing(o) == []


def test_overlapping_objects_keep_the_runs():
    arena = Arena(np.array([0, 256, 128]), np.array([256, 256, 256]), 512)
    pb = PhysicalBytes(arena)
    assert not pb._apart
    assert pb.take(0) == set() and pb.take(1) == set()
    assert pb.shares(0, 2) and pb.shares(1, 2) and not pb.shares(0, 1)
    assert pb.take(2) == {0, 1} and pb.owners(0) == {0, 2}
