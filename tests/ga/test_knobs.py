"""The policy's knobs searched as genes (swapadvisor's headroom)."""
import json

import numpy as np
import pytest

from allocator import Allocation
from ga.population import Individual, genome_key
from ga.search import SearchOptions, search
from planner import policy
from planner.policy import Knob, PlanRequest
from planner.policies import swapadvisor
from planner.simulate import simulate
from planner.verify import verify

from .helpers import PROFILE, budget_of, lstm, tight_budget
from .test_search import cnn, cnn_budget, cnn_facts, same_result


def quick(**kw):
    base = dict(population=8, max_generations=4, workers=1, progress=False, seed=0, knobs=True)
    return SearchOptions(**{**base, **kw})


def test_a_knob_s_default_is_on_its_grid():
    with pytest.raises(ValueError, match="default"):
        Knob((0.0, 0.5), 0.25)
    assert swapadvisor.POLICY.knobs["headroom"].default == swapadvisor.OPTIONS.headroom


def test_swapadvisor_plans_with_the_headroom_it_is_given():
    g = lstm()
    facts, budget = budget_of(g, tight_budget(g) * 1.5)
    times = {}
    for h in swapadvisor.HEADROOM.values:
        request = PlanRequest(g, facts, budget, PROFILE, policy_options={"headroom": h})
        program = swapadvisor.make(request)
        verify(program, g, budget.device_bytes)
        times[h] = simulate(program, g, PROFILE).total
        assert swapadvisor.seconds(request) == times[h]      # the search's fitness is the Program's time
    assert len(set(times.values())) > 1            # the knob changes the plan
    default = swapadvisor.make(PlanRequest(g, facts, budget, PROFILE))
    assert simulate(default, g, PROFILE).total == times[swapadvisor.OPTIONS.headroom]


def test_knob_values_are_part_of_the_genome():
    ind = Individual(np.arange(3, dtype=np.int32), Allocation([8], [0], [1]), 1.0, (("headroom", 0.5),))
    assert ind.key != genome_key(ind.schedule, ind.allocation)
    assert ind.key == genome_key(ind.schedule, ind.allocation, (("headroom", 0.5),))
    back = Individual.from_dict(json.loads(json.dumps(ind.to_dict())))
    assert back.options == ind.options and back.key == ind.key
    old = ind.to_dict()
    del old["options"]                             # a checkpoint from before knobs
    assert Individual.from_dict(old).options == ()


def test_a_search_with_knobs_returns_the_best_s_values_and_its_request_reproduces_it():
    g, facts, budget = cnn(), cnn_facts(), cnn_budget()
    r = search(facts, budget, PROFILE, quick(max_generations=5))
    grids = {"headroom": swapadvisor.HEADROOM, "recompute": swapadvisor.RECOMPUTE, "max_chain": swapadvisor.MAX_CHAIN}
    assert set(r.best_options) == set(grids)
    assert all(dict(i.options)[name] in knob.values for i in r.population for name, knob in grids.items())
    first = search(facts, budget, PROFILE, quick(max_generations=0, ideal=False)).population
    # The unsearched plan: the defaults, or recompute's seed value 0 where swapping alone is faster
    # (as the unsearched plan itself chooses), and its time.
    defaults = {name: knob.default for name, knob in grids.items()}
    assert dict(first[0].options) in (defaults, {**defaults, "recompute": 0.0})
    assert first[0].time == swapadvisor.seconds(PlanRequest(g, facts, budget, PROFILE))
    for name in grids:                                                              # random individuals vary them
        assert len({dict(i.options)[name] for i in first[2:]}) > 1
    program = policy.get("swapadvisor").make(r.request(g, facts, budget, PROFILE))
    verify(program, g, budget.device_bytes)
    assert simulate(program, g, PROFILE).total == r.best_time


def test_knobs_keep_the_search_reproducible_and_resumable(tmp_path):
    facts, budget = cnn_facts(), cnn_budget()
    whole = search(facts, budget, PROFILE, quick(max_generations=4))
    two = search(facts, budget, PROFILE, quick(max_generations=4, workers=2))
    same_result(whole, two)
    assert whole.best_options == two.best_options
    path = str(tmp_path / "ga.json")
    search(facts, budget, PROFILE, quick(max_generations=2, checkpoint=path))
    resumed = search(facts, budget, PROFILE, quick(max_generations=4, checkpoint=path, resume=True))
    same_result(whole, resumed)
    assert resumed.best_options == whole.best_options
    with pytest.raises(Exception, match="knobs"):
        search(facts, budget, PROFILE, quick(max_generations=5, checkpoint=path, resume=True, knobs=False))


def test_without_knobs_every_individual_takes_the_defaults():
    r = search(cnn_facts(), cnn_budget(), PROFILE, quick(knobs=False, max_generations=2))
    assert r.best_options == {} and all(i.options == () for i in r.population)


def test_a_knob_without_effect_is_held_at_its_default_and_a_fixed_one_is_no_gene():
    """max_chain means nothing when nothing is recomputed: every individual whose recompute gene
    is 0 carries max_chain's default (one genome per plan), and a search with recompute held at 0
    (--swap-only) has neither as a gene."""
    facts, budget = cnn_facts(), cnn_budget()
    r = search(facts, budget, PROFILE, quick(max_generations=3, population=16))
    swap_only = [dict(i.options) for i in r.population if dict(i.options)["recompute"] == 0]
    assert swap_only and all(o["max_chain"] == swapadvisor.MAX_CHAIN.default for o in swap_only)
    assert len({dict(i.options)["max_chain"] for i in r.population}) > 1      # still a gene elsewhere
    fixed = search(facts, budget, PROFILE, quick(max_generations=2, policy_options=(("recompute", 0.0),)))
    assert all(set(dict(i.options)) == {"headroom"} for i in fixed.population)
    assert set(fixed.best_options) == {"headroom"}


def test_the_seeds_are_planned_with_each_seed_value_and_keep_the_faster():
    """Whether recomputing pays differs by model: a seeded individual is planned with the knobs'
    defaults and with each seed value (Knob.seeds: recompute's 0), and keeps the faster, so the
    search starts from the unsearched plan whichever way it went. Here recomputing is made to lose."""
    facts, budget = cnn_facts(), cnn_budget()
    base = policy.get("swapadvisor")

    def seconds(request):
        return base.seconds(request) * (2.0 if request.policy_options["recompute"] else 1.0)

    def first_of(knob):
        mine = policy.Policy("seed-test", "a test policy", base.make, searches=True, seconds=seconds,
                             knobs={"recompute": knob})
        return search(facts, budget, PROFILE, quick(max_generations=0, ideal=False), policy=mine).population[0]

    seeded = first_of(Knob((0.0, 1.0), 1.0, seeds=(0.0,)))
    assert dict(seeded.options) == {"recompute": 0.0}
    assert seeded.time == base.seconds(PlanRequest(cnn(), facts, budget, PROFILE, policy_options={"recompute": 0.0}))
    assert dict(first_of(Knob((0.0, 1.0), 1.0)).options) == {"recompute": 1.0}     # no seed values: the default
    assert swapadvisor.RECOMPUTE.seeds == (0.0,)
    with pytest.raises(ValueError, match="seed values"):
        Knob((0.0, 1.0), 1.0, seeds=(2.0,))


def test_children_that_plan_alike_do_not_crowd_the_population():
    """A child whose order and allocation another has, at exactly its time, differs only in
    knob values that changed nothing: it is left out of selection (distinct_plans), so the
    population holds each plan once, while a child of the same genome but another time stays."""
    from ga.population import distinct_plans

    facts = cnn_facts()
    a = Individual(np.asarray(facts.order, dtype=np.int32), swapadvisor.simple_allocation(facts, cnn_budget()), 1.0,
                   (("headroom", 0.0), ("max_chain", 4)))
    clone = Individual(a.schedule, a.allocation, 1.0, (("headroom", 0.0), ("max_chain", 16)))
    other = Individual(a.schedule, a.allocation, 1.5, (("headroom", 0.5), ("max_chain", 4)))
    assert distinct_plans([a], [clone, other, Individual(other.schedule, other.allocation, 1.5, ())]) == [other]
    # A knob that changes nothing: every genome differing only there is a clone.
    idle = policy.Policy("test-idle-knob", "swapadvisor with a knob that does nothing", swapadvisor.make,
                         searches=True, seconds=swapadvisor.seconds, knobs={"idle": Knob((0, 1, 2, 3), 0)})
    r = search(facts, cnn_budget(), PROFILE, quick(max_generations=20, population=12, mutation=0.02,
                                                   schedule_mutation=0.0), policy=idle)
    plans = [(genome_key(i.schedule, i.allocation), i.time) for i in r.population]
    assert len(plans) == len(set(plans))
