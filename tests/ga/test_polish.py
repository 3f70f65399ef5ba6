"""The end-of-search knob polish (ga/polish.py)."""
import numpy as np

from allocator import Allocation
from ga.polish import knob_neighbours, polish
from ga.population import Individual
from ga.search import SearchOptions, search
from planner import policy
from planner.policies import swapadvisor
from planner.simulate import simulate
from planner.verify import verify

from .helpers import PROFILE
from .test_search import cnn, cnn_budget, cnn_facts

KNOBS = {"headroom": swapadvisor.HEADROOM, "recompute": swapadvisor.RECOMPUTE, "max_chain": swapadvisor.MAX_CHAIN}


def options(**values) -> tuple:
    return tuple(sorted(values.items()))


def test_each_neighbour_moves_one_knob_and_plans_alike_genomes_once():
    start = options(headroom=0.25, recompute=1.0, max_chain=16)
    around = knob_neighbours(start, KNOBS)
    assert start not in around and len(around) == len(set(around))
    for moved in around:
        assert sum(dict(moved)[k] != dict(start)[k] for k in KNOBS) == 1
    assert len(around) == 4 + 4 + 2
    # With nothing recomputed, max_chain is inert: its other values are the same genome.
    assert knob_neighbours(options(headroom=0.25, recompute=0.0, max_chain=16), KNOBS) == \
        [options(headroom=h, recompute=0.0, max_chain=16) for h in (0.0, 0.125, 0.375, 0.5)] + \
        [options(headroom=0.25, recompute=r, max_chain=16) for r in (0.5, 1.0, 2.0, 4.0)]


def fake_time(opts: tuple) -> float:
    """A bowl with its floor at headroom 0.5, recompute 2, max_chain 8."""
    v = dict(opts)
    return 10 + abs(v["headroom"] - 0.5) + abs(v["recompute"] - 2.0) + abs(v["max_chain"] - 8) / 8


def fake_evaluate(tasks):
    return [Individual(s, a, fake_time(o), o) for s, a, o in tasks]


def test_coordinate_descent_reaches_the_floor_and_stops_when_nothing_helps():
    start = Individual(np.arange(3, dtype=np.int32), Allocation([8], [0], [1]), 0.0,
                       options(headroom=0.0, recompute=0.0, max_chain=16))
    start.time = fake_time(start.options)
    done = polish(start, KNOBS, fake_evaluate)
    # Round 1 takes recompute 2 (the largest gain), round 2 headroom 0.5 then max_chain 8 in round 3.
    assert dict(done.after.options) == {"headroom": 0.5, "recompute": 2.0, "max_chain": 8}
    assert done.after.time == 10 and done.improved and done.evaluations == 8 + 10 + 10
    assert done.after.schedule is start.schedule and done.after.allocation is start.allocation
    assert "recompute 0 -> 2" in done.describe()
    again = polish(done.after, KNOBS, fake_evaluate)
    assert not again.improved and again.after is done.after and again.evaluations == 10
    assert "no knob change helped" in again.describe()


def check_best_is_real(r):
    """The result's best (after polishing) is what its request plans, and no slower than the GA's."""
    g, facts, budget = cnn(), cnn_facts(), cnn_budget()
    assert r.polished is not None and r.best_time == r.polished.after.time <= r.history[-1].best
    assert r.best_options == dict(r.polished.after.options)
    program = policy.get("swapadvisor").make(r.request(g, facts, budget, PROFILE))
    verify(program, g, budget.device_bytes)
    assert simulate(program, g, PROFILE).total == r.best_time


def test_a_search_ends_polished_and_its_request_reproduces_the_polished_best():
    base = dict(population=8, max_generations=2, workers=1, progress=False, seed=0, ideal=False)
    r = search(cnn_facts(), cnn_budget(), PROFILE, SearchOptions(**base))
    check_best_is_real(r)
    unpolished = search(cnn_facts(), cnn_budget(), PROFILE, SearchOptions(**base, polish=False))
    assert unpolished.polished is None and unpolished.best_time == r.polished.before.time
    assert unpolished.evaluations == r.evaluations          # the GA's count; the polish's apart


def test_a_search_cut_by_its_deadline_still_polishes_on_its_own_process():
    """The deadline terminates the worker processes mid-generation; the polish then plans here."""
    r = search(cnn_facts(), cnn_budget(), PROFILE,
               SearchOptions(population=8, workers=2, progress=False, seed=0, ideal=False, time_limit_s=1.0))
    assert r.stopped == "time"
    check_best_is_real(r)


def test_an_ablation_or_a_search_without_knobs_is_not_polished():
    base = dict(population=8, max_generations=1, workers=1, progress=False, seed=0, ideal=False)
    assert search(cnn_facts(), cnn_budget(), PROFILE, SearchOptions(**base, knobs=False)).polished is None
    assert search(cnn_facts(), cnn_budget(), PROFILE, SearchOptions(**base, mode="schedule")).polished is None
