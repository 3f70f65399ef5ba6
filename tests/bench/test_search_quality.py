"""A fast slice of the search-quality study (bench/search_quality.py): its graphs meet the
study's conditions, the enumeration is a true optimum, and both searches stay above it."""
import functools

import pytest

from bench import search_quality as sq


@functools.lru_cache(maxsize=None)
def graphs():
    return sq.study_graphs(2, seed=3)


def test_the_study_graphs_force_swapping_and_have_enough_orders():
    for g in graphs():
        assert sq.MIN_NODES <= len(g.nodes) <= sq.MAX_NODES
        orders = list(sq.topological_orders(g))
        assert sq.count_orders(g) == len(orders) >= sq.MIN_ORDERS
        assert len({tuple(o) for o in orders}) == len(orders)
        facts, budget, _ = sq.study_setup(g)
        assert budget.device_bytes < facts.peak_bytes


def test_the_enumerated_optimum_bounds_every_search_and_beats_the_default():
    for g in graphs():
        opt = sq.enumerate_optimum(g)
        facts, budget, profile = sq.study_setup(g)
        default = sq.Evaluator(facts, profile, budget).time(
            facts.order, sq.simple_allocation(facts, budget, profile, profile.node_seconds(g)))
        assert opt.time <= default
        for random_only in (False, True):
            best, evaluations = sq.searched(g, 0, 120, random_only, immigrants=0.25)
            assert evaluations <= 120
            assert best >= opt.time * (1 - sq.TIE)


def test_the_study_prints_its_summary(capsys):
    assert sq.main(["--graphs", "1", "--seeds", "1", "--evaluations", "60"]) == 0
    out = capsys.readouterr().out
    assert "GA against random sampling" in out and "median gap" in out
