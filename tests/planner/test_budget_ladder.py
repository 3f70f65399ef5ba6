"""The budget ladder (planner.budget_ladder): the rungs a budget sees include every rung a smaller
budget sees; the walk's early stop at a rung's lower bound finds the same plan as trying every
rung; the smallest budget that runs still plans; a search's candidate is planned at its own budget."""
import random

import pytest

import zoo
from engine.profile import Link, Profile, Rates
from engine.library.planning import plan
from planner import budget_ladder
from planner.budget import make_budget
from planner.budget_ladder import STEPS_PER_OCTAVE, fastest_rung, ladder_program, rungs_down_from, timed, top_rung
from planner.facts import GraphFacts
from planner.policy import PlanRequest, get
from planner.simulate import simulate

from .test_end_to_end import PROFILE


def test_a_larger_budget_sees_every_rung_a_smaller_one_sees():
    rng = random.Random(0)
    smallest, top = 3_000_000, 900_000_000
    for _ in range(300):
        low, high = sorted(rng.randrange(smallest, 2 * top) for _ in range(2))
        below_low, below_high = list(rungs_down_from(low, smallest, top)), list(rungs_down_from(high, smallest, top))
        assert set(below_low) <= set(below_high)
        assert below_high == sorted(below_high, reverse=True) and below_high[-1] == smallest
        assert all(r <= high for r in below_high)
        # The highest rung leaves at most one step of the budget unused.
        assert below_high[0] == top or below_high[0] * 2 ** (1 / STEPS_PER_OCTAVE) > high
    assert list(rungs_down_from(smallest - 1, smallest, top)) == []


def test_powers_of_two_and_the_ends_are_rungs():
    assert next(rungs_down_from(16 << 30, 1 << 30, 64 << 30)) == 16 << 30
    assert next(rungs_down_from(1234567, 1234567, 64 << 30)) == 1234567
    assert next(rungs_down_from(10 ** 12, 1 << 20, 5_000_001)) == 5_000_001


@pytest.fixture(scope="module")
def resnet():
    g = zoo.tiny("resnet")
    return g, GraphFacts(g)


# A link slow enough that the lower bound rises steeply as the budget falls (with PROFILE's,
# copies hide behind compute and the bounds of the tiny models stay below every plan).
SLOW_LINK = Profile("slow link", Link(h2d_bytes_per_s=2e7, d2h_bytes_per_s=2e7, duplex_bytes_per_s=3e7, latency_s=1e-6),
                    Rates(flops_per_s=1e11, bytes_per_s=5e10))


@pytest.mark.parametrize("name", ["swapadvisor", "capuchin"])
def test_the_walk_stops_early_only_where_no_lower_rung_can_be_faster(resnet, name, monkeypatch):
    """Stopping at the first rung whose bound is no less than the best plan gives the plan that
    trying every rung gives (the bounds are bounds), in fewer tries."""
    g, facts = resnet
    policy = get(name)
    roomy = facts.smallest_budget + 9 * (top_rung(facts) - facts.smallest_budget) // 10
    request = PlanRequest(g, facts, make_budget(facts, roomy, [policy.placed_by(None)]), SLOW_LINK)
    attempt = timed(policy)
    tried = []

    def counted(r):
        tried.append(r.budget.device_bytes)
        return attempt(r)

    seconds, _, rung = fastest_rung(request, policy, counted)
    early = len(tried)
    tried.clear()
    monkeypatch.setattr(budget_ladder, "lower_bounds", lambda *a, **k: type("B", (), {"recompute_bound": 0.0}))
    every_seconds, _, every_rung = fastest_rung(request, policy, counted)
    assert (seconds, rung) == (every_seconds, every_rung)
    assert early < len(tried)


def test_the_smallest_budget_still_plans_and_a_large_one_at_least_as_fast_as_the_top_rung(resnet):
    """The smallest budget is a rung (it plans); a budget above the unlimited allocation's sees
    that rung, so its plan is no slower than the policy's own plan there."""
    g, facts = resnet
    for name in ("swapadvisor", "capuchin"):
        policy = get(name)
        placed = [policy.placed_by(None)]
        for device_bytes in (facts.smallest_budget, 4 * top_rung(facts)):
            program = ladder_program(policy, PlanRequest(g, facts, make_budget(facts, device_bytes, placed), PROFILE))
            assert program.arena.arena_bytes <= device_bytes
        at_top = policy.make(PlanRequest(g, facts, make_budget(facts, top_rung(facts), placed), PROFILE))
        assert simulate(program, g, PROFILE).total <= simulate(at_top, g, PROFILE).total


def test_a_searched_candidate_is_planned_at_its_own_budget(resnet, monkeypatch):
    g, facts = resnet
    policy = get("swapadvisor")
    budget = make_budget(facts, (facts.smallest_budget + top_rung(facts)) // 2, [policy.placed_by(None)])

    def walk(*_):
        raise AssertionError("a search's candidate walked the ladder")

    monkeypatch.setattr(budget_ladder, "fastest_rung", walk)
    ladder_program(policy, PlanRequest(g, facts, budget, PROFILE, schedule=list(facts.order)))
    ladder_program(policy, PlanRequest(g, facts, budget, None))       # no profile: nothing to time rungs by
    with pytest.raises(AssertionError, match="walked"):
        ladder_program(policy, PlanRequest(g, facts, budget, PROFILE))


def test_searching_never_gives_a_slower_plan_than_the_ladder():
    """A search that finds nothing better than the default order at the budget (one individual,
    no knobs, no generation) gives the ladder's plan where a lower rung is faster (tiny rnn, 0.9
    of the way to the unlimited allocation: the rung at about 0.6 plans faster than the budget)."""
    from ga.search import SearchOptions

    g = zoo.tiny("rnn")
    facts = GraphFacts(g)
    policy = get("swapadvisor")
    roomy = facts.smallest_budget + 9 * (top_rung(facts) - facts.smallest_budget) // 10
    at_budget = simulate(policy.make(PlanRequest(g, facts, make_budget(facts, roomy), PROFILE)), g, PROFILE).total
    unsearched = plan(g, policy, PROFILE, roomy, facts=facts)
    searched = plan(g, policy, PROFILE, roomy, facts=facts,
                    search=SearchOptions(seed=0, population=1, knobs=False, max_generations=0, workers=1,
                                        progress=False))
    assert unsearched.seconds < at_budget
    assert searched.seconds == unsearched.seconds


def test_every_rung_the_walk_tries_is_reported_with_the_best_so_far(resnet, capsys):
    """``rungs_reported`` hears each rung tried, in order, with the fastest plan so far; the
    command line's heartbeat prints them on stderr (here at every rung)."""
    from engine.cli.plans import ladder_heartbeat

    g, facts = resnet
    policy = get("swapadvisor")
    roomy = facts.smallest_budget + 9 * (top_rung(facts) - facts.smallest_budget) // 10
    request = PlanRequest(g, facts, make_budget(facts, roomy, [policy.placed_by(None)]), SLOW_LINK)
    heard = []
    with budget_ladder.rungs_reported(lambda *rung: heard.append(rung)):
        seconds, _, device_bytes = fastest_rung(request, policy, timed(policy))
    assert [tried for tried, *_ in heard] == list(range(1, len(heard) + 1)) and len(heard) > 1
    rungs = [rung for _, rung, _, _ in heard]
    assert rungs == sorted(rungs, reverse=True)
    planned = [(s, rung) for _, rung, s, _ in heard if s is not None]
    assert heard[-1][3] == min(planned, key=lambda p: p[0]) == (seconds, device_bytes)
    tried = len(heard)
    fastest_rung(request, policy, timed(policy))        # outside the block: nobody hears
    assert len(heard) == tried
    with budget_ladder.rungs_reported(ladder_heartbeat("swapadvisor", 0.0)):
        fastest_rung(request, policy, timed(policy))
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == len(heard) and all(line.startswith("plan   swapadvisor: budget ladder, rung ") for line in lines)
    assert f"best so far {seconds:.4f} s/iter" in lines[-1]
