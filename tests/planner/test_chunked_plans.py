"""SwapAdvisor over chunks (allocator ``va``: ``Allocation.chunk_bytes``): tensors of at least a
chunk take as many chunks as they need, any of them, through a page table. The planner must
keep the pool's plans as they were, place wide tensors on chunks that are not adjacent, make
Programs the verifier accepts and rejects when broken, and train bit for bit under the
sanitizer at five budgets; ``auto`` keeps the faster of the pool and the chunks."""
import dataclasses

import numpy as np
import pytest

import zoo
from allocator import Allocation, PlacedLayout, SizeClassLayout
from engine.program import Arena
from ga.search import SearchOptions, search
from engine.training import Trainer
from planner.allocation import chunked_allocation, unlimited_allocation
from planner.budget import make_budget
from planner.errors import OutOfRoom
from planner.facts import GraphFacts
from planner.policies import swapadvisor
from planner.policy import PlanRequest
from planner.simulate import simulate
from planner.verify import VerificationError, verify

from tests.planner.test_end_to_end import ITERATIONS, PROFILE, assert_trains_as_unlimited

CHUNK = 4096        # a page: the tiny models' tensors are a few KiB


def request(g, facts, device_bytes, allocator="va", profile=PROFILE):
    budget = make_budget(facts, device_bytes)
    return PlanRequest(g, facts, budget, profile, None if profile is None else profile.node_seconds(g),
                       allocator=allocator, allocator_options={"chunk_bytes": CHUNK})


def budgets(facts):
    """Five budgets at which the chunked allocation plans, from near the least up to the unlimited pool."""
    full = unlimited_allocation(facts).pool_bytes + facts.scratch.bytes
    out = []
    for b in np.geomspace(facts.smallest_budget, full, 9):
        try:
            chunked_allocation(facts, make_budget(facts, int(b)), CHUNK)
        except OutOfRoom:
            continue
        out.append(int(b))
    return out[:2] + out[-3:] if len(out) > 5 else out


def test_a_chunked_allocation_pads_its_chunks_to_a_chunk_boundary():
    alloc = Allocation([100, 5000, 9000], [0, 1, 1], [3, 4], chunk_bytes=CHUNK)
    assert alloc.class_slot_bytes.tolist() == [256, CHUNK]
    assert alloc.chunks_offset == CHUNK and alloc.pool_bytes == 5 * CHUNK
    layout = SizeClassLayout.from_allocation(alloc)
    assert layout.object_offset.tolist() == [0, 256, 512] + [CHUNK * k for k in (1, 2, 3, 4)]
    assert layout.arena_bytes == alloc.pool_bytes
    assert Allocation.from_dict(alloc.to_dict()) == alloc
    assert alloc != Allocation([100, 5000, 9000], [0, 1, 1], [3, 4])
    with pytest.raises(ValueError, match="multiple of 4096"):
        Allocation([100], [0], [1], chunk_bytes=1000)


def test_a_placement_is_a_virtual_range_over_its_chunks_in_turn():
    base = SizeClassLayout.from_allocation(Allocation([100, 9000], [0, 1], [2, 4], chunk_bytes=CHUNK))
    # placement 0 on chunk objects 5 then 3 (not adjacent, backwards); placement 1 on 4
    placed = PlacedLayout(base, np.array([0, 2, 3]), np.array([5, 3, 4]))
    assert placed.object_bytes.tolist()[-2:] == [2 * CHUNK, CHUNK]
    p0 = base.num_objects
    arena = Arena.of(placed, 0)
    assert arena.physical_extents(p0) == [(int(base.object_offset[5]), CHUNK), (int(base.object_offset[3]), CHUNK)]
    assert arena.physical_extents(p0 + 1) == [(int(base.object_offset[4]), CHUNK)]
    assert arena.physical_extents(0) == [(0, 256)]          # the pool maps one to one


def test_the_page_table_has_a_row_per_run_of_chunks_adjacent_both_virtually_and_physically():
    base = SizeClassLayout.from_allocation(Allocation([100, 9000], [0, 1], [2, 5], chunk_bytes=CHUNK))
    pool, off = base.arena_bytes, base.object_offset
    # chunks are objects 2..6. Placements 0 and 1 on chunks 2, 3 | 4: one run across the two
    # placements; placement 2 on 6 then 5: a row each
    placed = PlacedLayout(base, np.array([0, 2, 3, 5]), np.array([2, 3, 4, 6, 5]))
    assert placed.mappings.tolist() == [[0, 0, pool], [pool, off[2], 3 * CHUNK],
                                        [pool + 3 * CHUNK, off[6], CHUNK], [pool + 4 * CHUNK, off[5], CHUNK]]
    assert PlacedLayout(base, np.array([0]), np.array([], dtype=np.int64)).mappings.tolist() == [[0, 0, pool]]


def test_a_layout_with_no_placement_has_the_base_objects_only():
    """A plan that places nothing in the chunk class (issue 43: its only tensor of a chunk's size
    an input nothing reads): no placement object, one object_offset per object_bytes, and every
    object of the arena maps (the verifier's ``physical_extents`` raised IndexError on a phantom
    offset)."""
    base = SizeClassLayout.from_allocation(Allocation([100, 9000], [0, 1], [2, 3], chunk_bytes=CHUNK))
    placed = PlacedLayout(base, np.array([0]), np.array([], dtype=np.int64))
    assert placed.object_offset.tolist() == base.object_offset.tolist()
    assert placed.object_bytes.tolist() == base.object_bytes.tolist()
    assert placed.virtual_bytes == base.arena_bytes
    arena = Arena.of(placed, 0)
    assert arena.num_objects == base.num_objects
    assert arena.all_physical_extents() == [[(int(o), int(b))] for o, b in zip(base.object_offset, base.object_bytes)]


@pytest.fixture(scope="module", params=["wresnet", "inception", "brnn"])
def model(request):
    g = zoo.tiny(request.param)
    ref = Trainer(g, seed=0)
    losses = [ref.step() for _ in range(ITERATIONS)]
    return request.param, g, GraphFacts(g), ref.state, losses


def test_wide_tensors_sit_in_chunks_that_are_not_adjacent(model):
    name, g, facts, _, _ = model
    program = swapadvisor.make(request(g, facts, budgets(facts)[0]))
    verify(program, g, budgets(facts)[0])
    arena = program.arena
    assert arena.virtual
    scattered = [o for o in range(arena.num_objects) if len(arena.physical_extents(o)) > 1]
    assert scattered, f"{name}: every placement is physically contiguous: the chunks are not exercised"


def test_chunked_plans_train_bit_identically_at_five_budgets(model):
    name, g, facts, ref_state, ref_losses = model
    tried = budgets(facts)
    assert len(tried) == 5, f"{name}: the chunked allocation plans at {len(tried)} budgets only"
    for i, budget in enumerate(tried):
        program = swapadvisor.make(request(g, facts, budget))
        verify(program, g, budget)
        assert_trains_as_unlimited(g, program, i, ref_state, ref_losses, f"{name} at {budget} bytes")


def test_the_verifier_rejects_two_live_placements_on_one_chunk(model):
    name, g, facts, _, _ = model
    budget = budgets(facts)[0]
    program = swapadvisor.make(request(g, facts, budget))
    arena = program.arena
    pool = int(arena.mappings[0, 2])                # the first row maps the pool one to one
    placements = range(int(np.searchsorted(arena.object_offset, pool)), arena.num_objects)
    # Every placement's k-th chunk moved onto the widest placement's k-th chunk: each range still
    # maps every byte once, but placements live at the same time now share physical bytes.
    widest = max(placements, key=lambda o: arena.object_bytes[o])
    target = [p for start, n in arena.physical_extents(widest) for p in range(start, start + n, CHUNK)]
    rows = [arena.mappings[0].tolist()]
    for o in placements:
        rows += [(int(arena.object_offset[o]) + k * CHUNK, target[k], CHUNK)
                 for k in range(int(arena.object_bytes[o]) // CHUNK)]
    broken = dataclasses.replace(program, arena=dataclasses.replace(arena, mappings=np.array(rows)))
    with pytest.raises(VerificationError, match="shares bytes with object"):
        verify(broken, g, budget)


def test_auto_keeps_the_faster_of_the_pool_and_the_chunks(model):
    name, g, facts, _, _ = model
    budget = budgets(facts)[1]
    times = {}
    for allocator in ("pool", "va", "auto"):
        program = swapadvisor.make(request(g, facts, budget, allocator))
        times[allocator] = simulate(program, g, PROFILE).total
        assert swapadvisor.seconds(request(g, facts, budget, allocator)) == times[allocator]   # the search's fitness
    assert times["auto"] == min(times["pool"], times["va"]), (name, times)


def test_without_a_profile_auto_plans_on_the_pool(model):
    name, g, facts, _, _ = model
    budget = budgets(facts)[1]
    program = swapadvisor.make(request(g, facts, budget, "auto", profile=None))
    assert not program.arena.virtual


def test_too_few_chunks_for_the_heaviest_operator_is_one_line():
    g = zoo.tiny("wresnet")
    facts = GraphFacts(g)
    with pytest.raises(OutOfRoom, match="too few .* chunks"):
        chunked_allocation(facts, make_budget(facts, facts.smallest_budget), 64 * CHUNK)


def test_a_search_on_auto_returns_a_request_that_plans_where_its_best_was_timed():
    """The search times candidates on swapadvisor's default (auto: pool or va, the faster); the
    request of its best must plan on that same choice, not on the pool alone."""
    g = zoo.tiny("inception")
    facts = GraphFacts(g)
    budget = make_budget(facts, budgets(facts)[0])
    opts = SearchOptions(population=4, max_generations=0, workers=1, progress=False, ideal=False,
                         allocator_options=(("chunk_bytes", CHUNK),))
    result = search(facts, budget, PROFILE, opts)
    program = swapadvisor.make(result.request(g, facts, budget, PROFILE))
    assert program.arena.virtual                 # on this graph and budget va is the faster
    assert simulate(program, g, PROFILE).total == result.best_time
