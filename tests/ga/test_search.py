import functools
import json
import math
import re

import numpy as np
import pytest

from engine.graph_check import check_order
from ga import search as search_module
from ga.allocation_ops import is_feasible
from ga.checkpoint import SearchCheckpointError
from ga.context import GraphContext
from ga.search import SearchOptions, search
from planner import policy
from planner.allocation import simple_allocation
from planner.budget import Budget, make_budget
from planner.errors import PlanError
from planner.facts import GraphFacts
from zoo import small

from .helpers import PROFILE, budget_of, lstm, tight_budget


@functools.lru_cache(maxsize=None)
def cnn():
    return small.residual_cnn()


@functools.lru_cache(maxsize=None)
def cnn_facts() -> GraphFacts:
    return GraphFacts(cnn())


def cnn_budget() -> Budget:
    return make_budget(cnn_facts(), int(tight_budget(cnn()) * 1.3))


@functools.lru_cache(maxsize=None)
def lstm_tight() -> tuple[GraphFacts, Budget]:
    """The LSTM's facts and 1.5 times its smallest budget."""
    return budget_of(lstm(), int(tight_budget(lstm()) * 1.5))


def quick(**kw):
    base = dict(population=8, max_generations=4, workers=1, progress=False, seed=0)
    return SearchOptions(**{**base, **kw})


def same_result(a, b):
    assert a.best_time == b.best_time
    assert a.best_schedule == b.best_schedule and a.best_allocation == b.best_allocation
    assert (a.generations, a.evaluations, a.initial_best, a.initial_time) == \
           (b.generations, b.evaluations, b.initial_best, b.initial_time)
    assert [(h.generation, h.best, h.mean, h.worst, h.evaluations) for h in a.history] == \
           [(h.generation, h.best, h.mean, h.worst, h.evaluations) for h in b.history]
    assert [i.time for i in a.population] == [i.time for i in b.population]


def test_search_improves_on_the_unsearched_plan_under_a_tight_budget():
    g = cnn()
    r = search(cnn_facts(), cnn_budget(), PROFILE, quick(max_generations=6))
    assert r.best_time <= r.initial_best <= r.initial_time
    assert r.best_time < r.initial_time                    # better than default order + simple
    assert r.ideal_time is not None and r.ideal_time <= r.best_time
    assert 0 < r.fraction_of_ideal() <= 1
    assert r.generations == 6 and r.stopped == "generations"
    assert r.evaluations == 8 + 6 * 8 and len(r.history) == 7
    assert min(h.best for h in r.history) >= r.best_time   # survivors are drawn, not the best kept
    ctx = GraphContext.from_graph(g)
    assert ctx.check_order(r.best_schedule)
    check_order(g, r.best_schedule)
    assert is_feasible(ctx, r.best_allocation, cnn_budget().pool_bytes)


def test_elite_keeps_the_best_alive():
    r = search(cnn_facts(), cnn_budget(), PROFILE, quick(max_generations=6, elite=1, ideal=False, polish=False))
    bests = [h.best for h in r.history]
    assert bests == sorted(bests, reverse=True) and bests[-1] == r.best_time


def test_same_seed_same_result_whatever_the_workers():
    facts, budget = lstm_tight()
    one = search(facts, budget, PROFILE, quick(workers=1, max_generations=3))
    two = search(facts, budget, PROFILE, quick(workers=2, max_generations=3))
    same_result(one, two)
    other = search(facts, budget, PROFILE, quick(workers=1, max_generations=3, seed=1))
    assert [i.time for i in other.population] != [i.time for i in one.population]


def test_resume_reaches_the_uninterrupted_result(tmp_path):
    facts, budget = cnn_facts(), cnn_budget()
    whole = search(facts, budget, PROFILE, quick(max_generations=4))
    path = str(tmp_path / "ga.json")
    half = search(facts, budget, PROFILE, quick(max_generations=2, checkpoint=path))
    saved = json.load(open(path))
    assert saved["generation"] == 2 == half.generations and len(saved["population"]) == 8
    assert all(isinstance(v, int) for v in saved["population"][0]["schedule"])
    assert set(saved["population"][0]["allocation"]) == {"sizes", "cls", "cnt"}
    resumed = search(facts, budget, PROFILE, quick(max_generations=4, checkpoint=path, resume=True, workers=2))
    same_result(whole, resumed)
    assert json.load(open(path))["generation"] == 4
    assert saved["identity"]["budget"] == budget.device_bytes
    with pytest.raises(SearchCheckpointError, match="seed"):
        search(facts, budget, PROFILE, quick(max_generations=5, checkpoint=path, resume=True, seed=3))


def test_resume_without_a_checkpoint_file_starts_afresh(tmp_path):
    path = str(tmp_path / "none.json")
    r = search(cnn_facts(), cnn_budget(), PROFILE, quick(max_generations=1, checkpoint=path, resume=True))
    assert r.generations == 1 and json.load(open(path))["generation"] == 1


@pytest.mark.parametrize("mode", ["schedule", "allocation"])
def test_ablations_fix_one_half(mode):
    facts, budget = cnn_facts(), cnn_budget()
    g = facts.graph
    r = search(facts, budget, PROFILE, quick(mode=mode, max_generations=2))
    assert r.mode == mode and r.evaluations == 8 + 2 * 8
    simple = simple_allocation(facts, budget, PROFILE)     # the search's: its profile's link included
    for ind in r.population:
        if mode == "schedule":
            assert ind.allocation == simple
        else:
            assert ind.schedule.tolist() == g.default_order()


def test_time_limit_stops_the_search():
    r = search(*lstm_tight(), PROFILE,
               quick(max_generations=None, time_limit_s=0.4, ideal=False))
    # "time" is set only once the deadline has passed; how soon after it the search returns is
    # load's to decide (an upper bound on elapsed_s could fail on a busy machine: issue 39)
    assert r.stopped == "time" and r.elapsed_s >= 0.39 and r.ideal_time is None   # 0.4 less a wait's rounding
    assert math.isfinite(r.best_time)


def test_ctrl_c_returns_the_best_so_far(monkeypatch):
    real_map = search_module.ProcessWorkers.map
    calls = []

    def interrupted(self, fn, items, deadline=None):
        calls.append(fn)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_map(self, fn, items, deadline)

    monkeypatch.setattr(search_module.ProcessWorkers, "map", interrupted)
    r = search(cnn_facts(), cnn_budget(), PROFILE, quick(max_generations=10))
    assert r.stopped == "interrupted" and r.generations == 1 and len(r.history) == 2
    assert math.isfinite(r.best_time) and len(r.population) == 8


def test_progress_bar_shows_best_mean_worst(capsys):
    search(cnn_facts(), cnn_budget(), PROFILE, quick(max_generations=2, progress=True))
    err = capsys.readouterr().err
    assert "best" in err and "mean" in err and "worst" in err


def test_result_history_files(tmp_path):
    r = search(cnn_facts(), cnn_budget(), PROFILE, quick(max_generations=1, ideal=False))
    r.write_history(str(tmp_path / "h.csv"))
    assert len((tmp_path / "h.csv").read_text().splitlines()) == 3


def test_budget_below_the_heaviest_operator_names_it():
    """A search gets its budget from make_budget, which refuses one that no allocation can run."""
    facts = cnn_facts()
    heavy = facts.graph.nodes[facts.demand.heaviest_node]
    with pytest.raises(PlanError, match=f"a budget of 1.0 KiB cannot run {re.escape(heavy.name)} \\({heavy.op}; .*the "
                                        "smallest budget that runs this model is"):
        make_budget(facts, 1024)


def test_a_budget_below_the_minimal_allocation_finds_nothing_feasible():
    """Handed a budget whose pool cannot hold the minimal allocation, the search runs and every
    individual costs inf (nothing raises, nothing is planned over the budget)."""
    facts = cnn_facts()
    budget = Budget(facts.smallest_budget - 1, facts.scratch.bytes)
    r = search(facts, budget, PROFILE, quick(max_generations=1, ideal=False))
    assert r.initial_time is None and r.best_time == math.inf
    assert all(i.time == math.inf for i in r.population)


def test_the_search_plans_with_the_policy_it_is_given():
    seen = []

    def make(request):
        seen.append(request.schedule)
        return policy.get("swapadvisor").make(request)

    mine = policy.Policy("test-search", "a test policy", make, searches=True)
    facts, budget = cnn_facts(), cnn_budget()
    r = search(facts, budget, PROFILE, quick(max_generations=1, ideal=False), policy=mine)
    # swapadvisor without its knobs as genes (mine declares none)
    default = search(facts, budget, PROFILE, quick(max_generations=1, ideal=False, knobs=False))
    assert len(seen) == r.evaluations == 16 and seen[0] == facts.order
    same_result(r, default)


def test_options_are_checked():
    with pytest.raises(ValueError, match="unknown search mode"):
        SearchOptions(mode="x")
    with pytest.raises(ValueError, match="population"):
        SearchOptions(population=0)
    with pytest.raises(ValueError, match="checkpoint"):
        SearchOptions(resume=True)
    with pytest.raises(ValueError, match="elite"):
        SearchOptions(population=4, elite=5)


def test_default_order_and_simple_allocation_are_individual_zero():
    facts, budget = cnn_facts(), cnn_budget()
    g = facts.graph
    r = search(facts, budget, PROFILE, quick(max_generations=0))
    assert r.generations == 0 and r.evaluations == 8
    assert r.initial_time is not None
    simple = simple_allocation(facts, budget, PROFILE)
    ev = search_module.Evaluator(facts, PROFILE, budget)
    assert r.initial_time == ev.time(np.arange(len(g.nodes)), simple)
    assert r.ideal_time == search_module.ideal_time(facts, PROFILE, PROFILE.node_seconds(g))


def test_individual_one_runs_updates_when_ready_with_the_simple_allocation():
    from engine.schedules import updates_when_ready
    from ga.population import Breeder, Variation
    facts, budget = cnn_facts(), cnn_budget()
    ctx = GraphContext.from_facts(facts)
    assert ctx.updates_first is not None and ctx.check_order(ctx.updates_first)
    assert ctx.updates_first.tolist() == updates_when_ready(facts.graph)
    simple = simple_allocation(facts, budget, PROFILE)
    breeder = Breeder(ctx, search_module.Evaluator(facts, PROFILE, budget), Variation(), 0, simple)
    one = breeder.first(1)
    assert one.schedule.tolist() == ctx.updates_first.tolist() and one.allocation == simple
    assert breeder.first(2).schedule.tolist() != ctx.updates_first.tolist()     # the rest are random


def test_selection_defaults_have_pressure_and_the_paper_s_is_selectable():
    o = SearchOptions()
    assert o.temperature == 0.02 and o.elites == 2
    assert SearchOptions(population=1).elites == 1
    with pytest.raises(ValueError, match="temperature"):
        SearchOptions(temperature=0)


def test_schedule_mutation_is_scaled_to_the_graph():
    o = SearchOptions()
    assert o.schedule_mutation_for(12) == o.mutation                   # small graphs: the paper's P
    assert o.schedule_mutation_for(9638) * 9638 == pytest.approx(search_module.MUTATION_PICKS)
    assert SearchOptions(schedule_mutation=0.05).schedule_mutation_for(9638) == 0.05


def test_an_unseeded_first_generation_is_all_random():
    from ga.population import Breeder, Variation
    facts, budget = cnn_facts(), cnn_budget()
    ctx = GraphContext.from_facts(facts)
    simple = simple_allocation(facts, budget, PROFILE)
    breeder = Breeder(ctx, search_module.Evaluator(facts, PROFILE, budget), Variation(seeded=False), 0, simple)
    firsts = [breeder.first(i) for i in range(3)]
    assert all(not np.array_equal(f.schedule, np.arange(ctx.num_nodes)) for f in firsts)
    assert all(f.schedule.tolist() != ctx.updates_first.tolist() for f in firsts)
    assert all(f.allocation != simple for f in firsts)
    r = search(facts, budget, PROFILE, quick(max_generations=1, seeded=False))
    assert r.initial_time is None and math.isfinite(r.best_time)


def test_an_evaluation_budget_stops_the_search_and_immigrants_keep_results_reproducible():
    facts, budget = lstm_tight()
    r = search(facts, budget, PROFILE, quick(max_generations=100, max_evaluations=30, immigrants=0.25))
    assert r.stopped == "evaluations" and 24 <= r.evaluations <= 30
    again = search(facts, budget, PROFILE, quick(max_generations=100, max_evaluations=30, immigrants=0.25,
                                                 workers=2))
    same_result(r, again)


def test_the_search_remembers_the_latest_genomes_and_saves_them(tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "REMEMBERED", 10)
    facts, budget = lstm_tight()
    path = str(tmp_path / "ga.json")
    r = search(facts, budget, PROFILE, quick(max_generations=2, checkpoint=path))
    saved = json.load(open(path))
    assert len(saved["remembered"]) == 10 and len(set(saved["remembered"])) == 10
    latest = [i.key.hex() for i in r.population]
    assert r.evaluations > 10 and saved["stalled"] is False
    assert set(saved["remembered"]) & set(latest)     # the newest children are among them


def test_segment_crossover_searches_are_reproducible_and_checked():
    facts, budget = lstm_tight()
    one = search(facts, budget, PROFILE, quick(workers=1, max_generations=3, segment=1.0))
    two = search(facts, budget, PROFILE, quick(workers=2, max_generations=3, segment=1.0))
    same_result(one, two)
    plain = search(facts, budget, PROFILE, quick(workers=1, max_generations=3))
    assert [i.time for i in plain.population] != [i.time for i in one.population]
    with pytest.raises(ValueError, match="segment"):
        search(facts, budget, PROFILE, quick(segment=2.0))


def test_an_allocation_only_search_keeps_the_order_its_facts_were_made_for():
    """Figure 10's allocation-only search on MXNet's order, not insertion order."""
    from engine.schedules import mxnet_order
    from planner.facts import GraphFacts
    g = cnn_facts().graph
    order = mxnet_order(g)
    assert order != g.default_order()
    facts = GraphFacts(g, order)
    r = search(facts, cnn_budget(), PROFILE, quick(mode="allocation", max_generations=1))
    assert all(ind.schedule.tolist() == order for ind in r.population)
