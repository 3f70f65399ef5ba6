"""Shared checks of online allocators (allocator/online.py): random alloc/free sequences and
the invariant every allocator owes, that no two live objects share a physical byte."""
from __future__ import annotations

import random

from engine.program import Arena


def assert_live_objects_disjoint(alloc, live) -> None:
    arena = Arena.of(alloc.layout(), 0)
    pieces = sorted((p, p + n, o) for o in live for p, n in arena.physical_extents(o) if n)
    reach, holder = -1, -1
    for start, end, o in pieces:
        assert start >= reach, f"live objects {holder} and {o} share physical byte {start}"
        if end > reach:
            reach, holder = end, o


def random_workload(alloc, steps: int, max_bytes: int, seed: int = 0):
    """Random allocations and frees; checks after every step; returns (live objects, their sizes)."""
    rng = random.Random(seed)
    live: dict[int, int] = {}
    for _ in range(steps):
        if live and (rng.random() < 0.45 or len(live) > 40):
            o = rng.choice(sorted(live))
            alloc.free(o)
            del live[o]
        else:
            n = rng.choice([rng.randrange(1, 600), rng.randrange(1, max_bytes)])
            o = alloc.alloc(n)
            if o is not None:
                assert o not in live
                assert alloc.layout().object_bytes[o] >= n
                live[o] = n
        assert alloc.stats().requested_bytes == sum(live.values())
        assert alloc.stats().reserved_bytes <= alloc.capacity_bytes
        assert_live_objects_disjoint(alloc, live)
    return live
