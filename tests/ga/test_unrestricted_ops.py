"""Figure 9c's unrestricted size-class mapping: the allocation (any size to any class, canonical
labels), the GA operators without the paper's pruning, and a plan on such an allocation."""
import numpy as np
import pytest

from allocator import Allocation
from allocator.unrestricted_classes import (UnrestrictedAllocation, canonical_labels,
                                            class_counts_from_extended, widened)
from ga import allocation_ops as ao
from ga import unrestricted_ops as uo
from ga.context import GraphContext

from .helpers import PROFILE, budget_of, lstm, lstm_context, tight_budget

MB = 2**20


def test_a_class_may_hold_sizes_that_are_not_neighbours():
    """1 MB and 4 MB share a class (object 4 MB), 2 and 3 MB another (object 3 MB): no restricted CLS."""
    a = UnrestrictedAllocation([MB, 2 * MB, 3 * MB, 4 * MB], [1, 0, 0, 1], [2, 3])
    assert a.class_object_bytes.tolist() == [3 * MB, 4 * MB]
    assert a.pool_bytes == 2 * 3 * MB + 3 * 4 * MB
    with pytest.raises(ValueError, match="must start at class 0"):
        Allocation(a.sizes, a.cls, a.cnt)
    assert Allocation.from_dict(a.to_dict()) == a and a.with_counts([1, 1]).__class__ is UnrestrictedAllocation


def test_labels_are_canonical_so_one_grouping_is_one_genome():
    assert canonical_labels([7, 3, 7, 7]).tolist() == canonical_labels([0, 5, 0, 0]).tolist() == [1, 0, 1, 1]
    with pytest.raises(ValueError, match="canonical_labels"):
        UnrestrictedAllocation([1, 2, 3], [1, 0, 0], [1, 1])       # class 1 holds the largest size: must be last
    restricted = Allocation([1, 2, 3, 4], [0, 0, 1, 1], [2, 5])
    assert widened(restricted).cls.tolist() == restricted.cls.tolist() and widened(restricted) != restricted


def test_counts_average_over_a_class_wherever_its_sizes_are():
    """Figure 5's CNTEXT [8, 1, 4, 4] over classes {1 MB, 4 MB} and {2 MB, 3 MB}: [2.5 -> 3, 6]."""
    assert class_counts_from_extended([1, 0, 0, 1], [8, 1, 4, 4]).tolist() == [3, 6]


def test_class_minima_gather_a_class_s_sizes():
    ctx = GraphContext.synthetic(sizes=[1, 2, 3, 4], node_rows=[[2, 0, 0, 1], [0, 1, 1, 0]])
    assert ctx.class_minima([1, 0, 0, 1]).tolist() == [2, 3]     # {2, 3}: row 2; {1, 4}: row 1
    assert ctx.class_minima([0, 0, 1, 1]).tolist() == [2, 1]     # the restricted path, unchanged
    assert ctx.class_slot_bytes([1, 0, 0, 1]).tolist() == [256, 256]


def test_random_children_and_mutants_are_valid_and_reach_non_runs():
    ctx = lstm_context()
    budget = 3 * tight_budget(lstm())
    rng = np.random.default_rng(0)
    made = []
    for _ in range(20):
        a1, a2 = uo.random_allocation(ctx, budget, rng), uo.random_allocation(ctx, budget, rng)
        for child in (*uo.random_crossover(ctx, a1, a2, budget, rng), uo.mutate(ctx, a1, 0.3, budget, rng, 0.25)):
            assert isinstance(child, UnrestrictedAllocation)
            assert ao.is_feasible(ctx, child, budget)
            made.append(child)
    assert any(np.any(np.diff(a.cls) < 0) for a in made)           # classes that are not runs


def test_a_plan_on_an_unrestricted_allocation_verifies():
    from ga.fitness import Evaluator
    from planner import policy
    from planner.verify import verify

    g = lstm()
    facts, budget = budget_of(g, 3 * tight_budget(g))
    ctx = lstm_context()
    alloc = next(a for a in (uo.random_allocation(ctx, budget.pool_bytes, np.random.default_rng(s)) for s in range(50))
                 if np.any(np.diff(a.cls) < 0))
    ev = Evaluator(facts, PROFILE, budget, policy.searched(), PROFILE.node_seconds(g), "pool")
    program = ev.program(facts.order, alloc)
    verify(program, g, budget.device_bytes)
    assert np.isfinite(ev.time(facts.order, alloc))


def test_the_search_keeps_an_unrestricted_mapping_and_refuses_it_off_the_pool():
    from ga.search import SearchOptions, search

    g = lstm()
    facts, budget = budget_of(g, 3 * tight_budget(g))
    opts = SearchOptions(population=6, max_generations=2, seed=1, workers=1, seeded=False, knobs=False,
                         allocator="pool", size_mapping="unrestricted", progress=False, ideal=False)
    result = search(facts, budget, PROFILE, opts)
    assert isinstance(result.best_allocation, UnrestrictedAllocation)
    assert all(isinstance(i.allocation, UnrestrictedAllocation) for i in result.population)
    with pytest.raises(ValueError, match="size classes only"):
        SearchOptions(size_mapping="unrestricted")
