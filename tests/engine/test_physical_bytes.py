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


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("bucket_bytes", [None, 1, 16, 64, 1 << 20])
def test_runs_answer_as_a_byte_by_byte_owner_map(seed, bucket_bytes):
    """Objects of several physical pieces (a page table mapping 16-byte virtual pages to random
    physical ones, objects of random virtual ranges) written in random order: who last wrote each
    of an object's bytes, and which objects share one, as a map of every physical byte says,
    whatever the bucket size (pieces that span buckets, end inside one, fill one whole)."""
    rng = np.random.default_rng(seed)
    page, pages, physical_pages = 16, 64, 24
    rows = np.array([(v * page, int(rng.integers(physical_pages)) * page, page) for v in range(pages)])
    starts, sizes = [], []
    while len(starts) < 20:           # an object maps each physical byte once (va's page table does)
        start = int(rng.integers(0, pages * page - 1))
        size = min(int(rng.integers(0, 5 * page)), pages * page - start)
        touched = rows[start // page:(start + size + page - 1) // page, 1]
        if len(set(touched.tolist())) == len(touched):
            starts.append(start)
            sizes.append(size)
    arena = Arena(np.array(starts), np.array(sizes), physical_pages * page, mappings=rows,
                  virtual_bytes=pages * page)
    pb = PhysicalBytes(arena, bucket_bytes)
    assert not pb._apart
    last_writer = np.full(physical_pages * page, -1)
    held = [np.concatenate([np.arange(a, a + n) for a, n in arena.physical_extents(o)] or [np.zeros(0, int)])
            for o in range(len(starts))]
    for o in rng.integers(0, len(starts), 80).tolist():
        before = set(last_writer[held[o]].tolist()) - {-1}
        assert pb.owners(o) == before
        assert pb.take(o) == before
        last_writer[held[o]] = o
        other = int(rng.integers(len(starts)))
        if other != o:
            assert pb.shares(o, other) == bool(np.intersect1d(held[o], held[other]).size)
