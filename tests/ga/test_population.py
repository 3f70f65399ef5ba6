import math

import numpy as np
import pytest

from ga import allocation_ops as ao
from ga.fitness import Evaluator
from ga.population import (IMMIGRANT, REBREED_ATTEMPTS, Breeder, Individual, Variation, genome_key, pairs,
                           rng_for, select, survival_probabilities)
from planner.allocation import simple_allocation

from .helpers import PROFILE, budget_of, lstm, lstm_context, tight_budget


def breeder(mode="both", budget_scale=1.5, mutation=0.1, seed=0):
    g, ctx = lstm(), lstm_context()
    facts, budget = budget_of(g, int(tight_budget(g) * budget_scale))
    simple = simple_allocation(facts, budget)
    return Breeder(ctx, Evaluator(facts, PROFILE, budget), Variation(mode, mutation), seed, simple)


def test_the_breeders_pool_bytes_are_what_the_device_budget_leaves():
    b = breeder()
    budget = b.evaluator.budget
    assert b.pool_bytes == budget.pool_bytes == budget.device_bytes - budget.scratch_bytes
    assert budget.scratch_bytes > 0 and isinstance(b.pool_bytes, int)


# --- Eq. 1 ---

def test_survival_probabilities_follow_equation_1():
    times = [2.0, 3.0, 4.0, math.inf]
    p = survival_probabilities(times, t_best=2.0)
    t_norm = np.array([0.0, -0.5, -1.0])
    expected = np.exp(t_norm) / np.exp(t_norm).sum()
    np.testing.assert_allclose(p[:3], expected)
    assert p[3] == 0.0
    # T_best is the best seen so far, possibly no longer in the population.
    p = survival_probabilities([2.0, 3.0], t_best=1.0)
    np.testing.assert_allclose(p, np.exp([-1.0, -2.0]) / np.exp([-1.0, -2.0]).sum())
    # Nothing feasible: uniform.
    np.testing.assert_allclose(survival_probabilities([math.inf] * 4, math.inf), 0.25)


def test_selection_draws_without_replacement_by_equation_1():
    times = np.array([1.0, 1.5, 2.0, 4.0])
    p = survival_probabilities(times, 1.0)
    counts = np.zeros(4)
    for seed in range(3000):
        chosen = select(times, 1.0, 1, np.random.default_rng(seed))
        counts[chosen] += 1
    np.testing.assert_allclose(counts / 3000, p, atol=0.03)
    chosen = select(times, 1.0, 3, np.random.default_rng(0))
    assert len(set(chosen.tolist())) == 3 and list(chosen) == sorted(chosen)
    assert select(times, 1.0, 9, np.random.default_rng(0)).tolist() == [0, 1, 2, 3]


def test_selection_fills_with_infeasible_only_when_it_must():
    times = [1.0, math.inf, 2.0, math.inf, math.inf]
    chosen = select(times, 1.0, 2, np.random.default_rng(0))
    assert chosen.tolist() == [0, 2]
    chosen = select(times, 1.0, 3, np.random.default_rng(0))
    assert {0, 2} < set(chosen.tolist()) and len(chosen) == 3


def test_elite_always_survive_and_the_rest_follow_equation_1():
    times = np.array([5.0, 1.0, 3.0, 1.0, 2.0, math.inf])
    for seed in range(20):
        chosen = select(times, 1.0, 3, np.random.default_rng(seed), elite=2)
        assert {1, 3} <= set(chosen.tolist()) and len(chosen) == 3 and 5 not in chosen
    assert select(times, 1.0, 2, np.random.default_rng(0), elite=2).tolist() == [1, 3]
    assert np.array_equal(select(times, 1.0, 3, np.random.default_rng(4), elite=0),
                          select(times, 1.0, 3, np.random.default_rng(4)))


def test_pairs_are_distinct_parents():
    got = pairs(5, 20, np.random.default_rng(0))
    assert len(got) == 20 and all(i != j and 0 <= i < 5 and 0 <= j < 5 for i, j in got)
    assert pairs(1, 3, np.random.default_rng(0)) == [(0, 0)] * 3


def test_rng_for_depends_on_every_part_of_the_seed():
    draws = {tuple(rng_for(*key).integers(0, 2**31, 4)) for key in
             [(0, 1, 2, 3), (1, 1, 2, 3), (0, 2, 2, 3), (0, 1, 3, 3), (0, 1, 2, 2)]}
    assert len(draws) == 5
    assert rng_for(7, 1, 2, 3).random() == rng_for(7, 1, 2, 3).random()


# --- first generation and children ---

def test_first_individual_is_the_default_order_with_the_simple_allocation():
    b = breeder()
    first = b.first(0)
    assert first.schedule.tolist() == list(range(b.ctx.num_nodes))
    assert first.allocation == b.simple
    assert math.isfinite(first.time)
    others = [b.first(i) for i in range(1, 5)]
    assert all(b.ctx.check_order(o.schedule) for o in others)
    assert all(ao.is_feasible(b.ctx, o.allocation, b.pool_bytes) for o in others)
    assert len({o.schedule.tobytes() for o in others}) == 4
    again = b.first(3)
    assert np.array_equal(again.schedule, others[2].schedule) and again.allocation == others[2].allocation


@pytest.mark.parametrize("mode, count", [("both", 4), ("schedule", 2), ("allocation", 2)])
def test_each_crossover_yields_its_children(mode, count):
    b = breeder(mode)
    p1, p2 = b.first(1), b.first(2)
    kids = b.children(1, 0, p1, p2)
    assert len(kids) == count == b.variation.children_per_crossover
    for kid in kids:
        assert b.ctx.check_order(kid.schedule)
        minima = b.ctx.class_minima(kid.allocation.cls)
        assert np.all(kid.allocation.cnt >= minima)
        if ao.is_feasible(b.ctx, kid.allocation, b.pool_bytes):
            assert math.isfinite(kid.time)
        else:  # a child whose class minima alone exceed the budget: infeasible, time inf
            assert int(minima @ kid.allocation.class_slot_bytes) > b.pool_bytes and kid.time == math.inf
        if mode == "schedule":
            assert kid.allocation == b.simple
        if mode == "allocation":
            assert kid.schedule.tolist() == list(range(b.ctx.num_nodes))
    if mode == "both":  # 2 schedules x 2 allocations
        assert np.array_equal(kids[0].schedule, kids[1].schedule)
        assert kids[0].allocation == kids[2].allocation
    # Any child can be made alone (in any process) and agrees with its siblings' halves.
    again = b.child((1, 0, count - 1, p1, p2, frozenset()))
    assert np.array_equal(again.schedule, kids[-1].schedule) and again.allocation == kids[-1].allocation
    assert again.time == kids[-1].time


def test_a_child_equal_to_a_population_member_is_bred_again_or_dropped():
    b = breeder()
    p1, p2 = b.first(1), b.first(2)
    plain = b.child((1, 0, 3, p1, p2, frozenset()))
    clone = genome_key(plain.schedule, plain.allocation)
    again = b.child((1, 0, 3, p1, p2, frozenset({clone})))
    assert genome_key(again.schedule, again.allocation) != clone
    assert b.ctx.check_order(again.schedule) and math.isfinite(again.time)
    # The same task with the same known genomes breeds the same child (any process agrees).
    twice = b.child((1, 0, 3, p1, p2, frozenset({clone})))
    assert np.array_equal(twice.schedule, again.schedule) and twice.allocation == again.allocation
    # Every attempt known: no child, nothing evaluated.
    every = frozenset(genome_key(b.schedule_child(1, 0, 1, p1, p2, a), b.allocation_child(1, 0, 1, p1, p2, a))
                      for a in range(REBREED_ATTEMPTS))
    assert b.child((1, 0, 3, p1, p2, every)) is None


def test_an_immigrant_is_a_random_individual_outside_the_known_ones():
    b = breeder()
    one = b.child((2, 5, IMMIGRANT, None, None, frozenset()))
    assert b.ctx.check_order(one.schedule) and ao.is_feasible(b.ctx, one.allocation, b.pool_bytes)
    other = b.child((2, 6, IMMIGRANT, None, None, frozenset()))
    assert one.schedule.tobytes() != other.schedule.tobytes()
    known = frozenset({genome_key(one.schedule, one.allocation)})
    fresh = b.child((2, 5, IMMIGRANT, None, None, known))
    assert genome_key(fresh.schedule, fresh.allocation) not in known


def test_individual_round_trips_through_json_form():
    ind = breeder().first(1)
    back = Individual.from_dict(ind.to_dict())
    assert np.array_equal(back.schedule, ind.schedule) and back.allocation == ind.allocation
    assert back.time == ind.time
    inf = Individual(ind.schedule, ind.allocation)
    assert inf.to_dict()["time"] is None and Individual.from_dict(inf.to_dict()).time == math.inf


def test_variation_rejects_bad_settings():
    with pytest.raises(ValueError, match="unknown search mode"):
        Variation("neither")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Variation("both", 1.5)
    g, ctx = lstm(), lstm_context()
    facts, budget = budget_of(g, tight_budget(g))
    with pytest.raises(ValueError, match="simple allocation"):
        Breeder(ctx, Evaluator(facts, PROFILE, budget), Variation("schedule"), 0, None)


def test_temperature_sharpens_equation_1():
    from ga.population import survival_probabilities
    paper = survival_probabilities([1.0, 1.1], 1.0)
    assert paper[0] / paper[1] == pytest.approx(np.exp(0.1))          # 10% apart: 10% more weight
    sharp = survival_probabilities([1.0, 1.1], 1.0, temperature=0.02)
    assert sharp[0] / sharp[1] == pytest.approx(np.exp(5.0))
