"""The online policies' reuse edges from runs of physical bytes match the definition: per
stream, the last use of any earlier object (by first write) sharing a byte with the object."""
import random

import numpy as np
import pytest

from engine.program import Arena, sharing_objects
from planner.online_program import reuse_edges_by_bytes


def reference(sharing, first_write, touch):
    """The definition, over every pair of objects that share a byte (quadratic; the old code)."""
    for o, first in enumerate(first_write):
        if first < 0:
            continue
        latest = [-1, -1, -1]
        for x in sharing[o]:
            if first_write[x] < first:
                latest = [max(a, b) for a, b in zip(latest, touch[x])]
        extra = [d for d in latest if d >= 0]
        if extra:
            yield first, extra


def random_arena(rng: random.Random, n: int) -> Arena:
    """Objects on a plain arena at random offsets, or on 8-byte chunks a page table maps at random
    (chunks shared between objects); some empty."""
    size = [rng.choice([0, 1, 2, 4, 8, 16]) for _ in range(n)]
    if rng.random() < 0.5:
        return Arena(np.array([rng.randrange(0, 64) for _ in range(n)]), np.array(size), 10**6, 0, {})
    chunk, at, offsets, rows = 8, 0, [], []
    for nbytes in size:
        offsets.append(at)
        for c in range(-(-nbytes // chunk)):
            rows.append((at + c * chunk, rng.randrange(0, 6) * chunk, chunk))
        at += -(-nbytes // chunk) * chunk
    return Arena(np.array(offsets), np.array(size), 10**6, 0, {}, np.array(rows).reshape(-1, 3), at)


@pytest.mark.parametrize("seed", range(4))
def test_the_edges_from_runs_of_bytes_are_the_pairwise_definitions(seed):
    rng = random.Random(seed)
    for _ in range(400):
        n = rng.randint(1, 14)
        arena = random_arena(rng, n)
        first_write = [rng.choice([-1, *range(30)]) for _ in range(n)]     # equal ones: one instruction
        touch = [[rng.choice([-1, *range(40)]) for _ in range(3)] for _ in range(n)]
        assert list(reuse_edges_by_bytes(arena, first_write, touch)) == \
            list(reference(sharing_objects(arena), first_write, touch))
