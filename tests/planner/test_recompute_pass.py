"""Keep, swap or recompute in the compiled swap pass (planner/swap_scan.py), on small hand-made
graphs whose plan can be read off, and on seeded random graphs.

Every tensor is 1 KiB (256 float32); one size class of three objects unless said otherwise."""
from dataclasses import fields, replace

import numpy as np
import pytest

from allocator import Allocation, SizeClassLayout
from engine.backends.cpu import CpuBackend
from engine.executor import ProgramExecutor
from engine import reference
from engine.ir import PERSISTENT_KINDS, Graph, Kind
from engine.profile import Link, Profile, Rates
from engine.program import COMPUTE, SWAP_OUT
from engine.library.planning import plan as plan_policy
from ga.search import SearchOptions
from ga.search import search as ga_search
from planner import policy
from planner.errors import PlanError
from planner.policy import RECOMPUTE_OPTION
from planner.facts import GraphFacts
from planner import swap_scan
from planner.swap_planner import GraphArrays, PlanOptions, _scan, _Schedule, plan
from planner.verify import verify

from .test_end_to_end import LINK
from .test_smallest_budget import random_graph

KIB = 1024
# A link so slow that recomputing anything is cheaper than copying it out and back.
SLOW_LINK = Profile("slow-link", Link(h2d_bytes_per_s=1e6, d2h_bytes_per_s=1e6, duplex_bytes_per_s=1.5e6,
                                      latency_s=1e-6), Rates(flops_per_s=1e11, bytes_per_s=5e10))


def one_class(count: int, size: int = KIB) -> Allocation:
    return Allocation(np.array([size]), np.array([0]), np.array([count]))


def late_reader_graph(chain: bool = False, wide: bool = False):
    """a is made early and read only at the end, while b, c, e take every object (with ``wide``,
    e also reads x: four objects). a = tanh(x) (x, an input, has a current host copy); with
    ``chain``, a = tanh(h), h = relu(x) dying at a, so recreating a takes two recomputations."""
    g = Graph("late-reader")
    x = g.input("x", (256,))
    if chain:
        (h,) = g.apply("relu", [x], name="h")
        (a,) = g.apply("tanh", [h], name="a")
    else:
        (a,) = g.apply("tanh", [x], name="a")
    (b,) = g.apply("sigmoid", [x], name="b")
    (c,) = g.apply("scale", [b], name="c", factor=2.0)
    if wide:
        g.apply("sum_n", [c, b, x], name="e")           # a must leave for e
    else:
        g.apply("add", [c, b], name="e")
    (y,) = g.apply("relu", [a], name="y")
    g.mark_output(y)
    return g


def recomputed(g, program) -> list[str]:
    return [g.nodes[i.target].name for i in program.instrs if i.kind == COMPUTE and i.recompute]


def copied_out(g, program) -> list[str]:
    return [g.tensors[i.target].name for i in program.instrs if i.kind == SWAP_OUT and i.copy]


def trains_as_unlimited(g, program) -> bool:
    """Two iterations on the sanitizing, jittering cpu backend leave the numpy reference's state
    and outputs, bit for bit."""
    rng = np.random.default_rng(0)
    leaves = {t: rng.standard_normal(g.tensors[t].shape).astype(g.tensors[t].dtype)
              for t in g.leaves(Kind.INPUT, Kind.LABEL, *PERSISTENT_KINDS)}
    persistent = set(g.leaves(*PERSISTENT_KINDS))
    state = {t: a for t, a in leaves.items() if t in persistent}
    batch = {t: a for t, a in leaves.items() if t not in persistent}
    backend = CpuBackend(LINK, sanitize=True, seed=1, jitter_s=1e-4)
    try:
        runner = ProgramExecutor(program, g, backend)
        runner.load_state(state)
        for _ in range(2):
            ref = reference.execute(g, g.default_order(), {**state, **batch},
                                    keep=[nxt for _, nxt in g.state_pairs] + g.read_back())
            state = {**state, **{cur: ref[nxt] for cur, nxt in g.state_pairs}}
            runner.step(batch)
            outputs = runner.outputs()
            if not all(np.array_equal(ref[t], outputs[t]) for t in g.outputs):
                return False
        return all(np.array_equal(state[t], a) for t, a in runner.state().items())
    finally:
        backend.close()


@pytest.mark.parametrize("options,profile", [(PlanOptions(recompute=1.0), SLOW_LINK),
                                             (PlanOptions(recompute_only=True), None)])
def test_a_tensor_read_late_is_dropped_and_recomputed_not_copied_out(options, profile):
    g = late_reader_graph()
    p = plan(g, g.default_order(), one_class(3), 0, profile, options=options)
    verify(p, g)
    assert recomputed(g, p) == ["a"] and copied_out(g, p) == []
    assert trains_as_unlimited(g, p)


def test_a_recomputing_pass_grows_buffers_too_small_and_keeps_the_room():
    """Recomputations have no up-front bound: a pass that may recompute starts with twice the
    bounds' room, and one whose buffer fills grows it, plans the same, and keeps the room for the
    next pass of the plan (instead of overrunning, and running twice, each time)."""
    g = late_reader_graph()
    ga, layout = GraphArrays.of(g), SizeClassLayout.from_allocation(one_class(3))
    sc = _Schedule(g, ga, g.default_order(), layout, SLOW_LINK.node_seconds(g), SLOW_LINK.link.h2d_bytes_per_s,
                   PlanOptions(recompute=1.0))
    assert sc.capacity == swap_scan.Capacity(*(2 * c for c in sc.bound_capacity))
    ample = _scan(g, ga, sc, layout, {})[0]
    sc.capacity = sc.capacity._replace(objects=1)
    grown = _scan(g, ga, sc, layout, {})[0]
    assert sc.capacity.objects > 1 and ample.recompute.any()
    assert all(np.array_equal(getattr(ample, f.name), getattr(grown, f.name)) for f in fields(ample))


def test_swap_only_copies_it_out_and_back():
    g = late_reader_graph()
    p = plan(g, g.default_order(), one_class(3), 0, SLOW_LINK, options=PlanOptions(recompute=0.0))
    verify(p, g)
    assert recomputed(g, p) == [] and copied_out(g, p) == ["a"]


def test_a_fast_link_makes_swapping_the_cheaper_choice():
    g = late_reader_graph()
    fast = Profile("fast-link", Link(1e15, 1e15, 1.5e15, 0.0), Rates(flops_per_s=1e6, bytes_per_s=1e6))
    p = plan(g, g.default_order(), one_class(3), 0, fast, options=PlanOptions(recompute=1.0))
    assert recomputed(g, p) == [] and copied_out(g, p) == ["a"]


def test_a_chain_recreates_a_dead_input_first_within_its_bound():
    g = late_reader_graph(chain=True, wide=True)
    p = plan(g, g.default_order(), one_class(4), 0, SLOW_LINK, options=PlanOptions(recompute=1.0, max_chain=2))
    verify(p, g)
    assert recomputed(g, p) == ["h", "a"] and copied_out(g, p) == []
    assert trains_as_unlimited(g, p)
    # One node per chain is not enough: a is copied out instead.
    p = plan(g, g.default_order(), one_class(4), 0, SLOW_LINK, options=PlanOptions(recompute=1.0, max_chain=1))
    assert recomputed(g, p) == [] and copied_out(g, p) == ["a"]


def test_a_chain_that_would_not_fit_beside_its_reader_is_not_taken():
    """Recreating a through h needs x, h, a and y's object at once: four objects. With three the
    pass copies a out instead of planning a recomputation it could not run."""
    g = late_reader_graph(chain=True)
    p = plan(g, g.default_order(), one_class(3), 0, SLOW_LINK, options=PlanOptions(recompute=1.0))
    verify(p, g)
    assert recomputed(g, p) == [] and copied_out(g, p) == ["a"]


def test_an_output_of_a_node_with_several_outputs_is_never_dropped():
    g = Graph("split-late")
    x = g.input("x", (512,))
    a, a2 = g.apply("split", [x], name="s", axis=0, sizes=[256, 256])
    (b,) = g.apply("sigmoid", [a2], name="b")
    (c,) = g.apply("scale", [b], name="c", factor=2.0)
    g.apply("add", [c, b], name="e")
    (y,) = g.apply("relu", [a], name="y")
    g.mark_output(y)
    alloc = Allocation(np.array([KIB, 2 * KIB]), np.array([0, 0]), np.array([3]))
    p = plan(g, g.default_order(), alloc, 0, SLOW_LINK, options=PlanOptions(recompute=1.0))
    verify(p, g)
    assert recomputed(g, p) == [] and "s:0" in copied_out(g, p)
    with pytest.raises(PlanError):          # recomputing only, a cannot leave
        plan(g, g.default_order(), alloc, 0, options=PlanOptions(recompute_only=True))


def test_a_checkpoint_is_never_dropped():
    g = late_reader_graph()
    a = next(n.outputs[0] for n in g.nodes if n.name == "a")
    with pytest.raises(PlanError):
        plan(g, g.default_order(), one_class(3), 0, options=PlanOptions(recompute_only=True, keep=(a,)))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("options,profile", [(PlanOptions(recompute=4.0, headroom=0.25, kept_ahead=True), SLOW_LINK),
                                             (PlanOptions(recompute_only=True), SLOW_LINK),
                                             (PlanOptions(recompute_only=True, several_outputs=True), SLOW_LINK)])
def test_random_graphs_plan_recomputations_that_verify_and_train_bit_identically(seed, options, profile):
    """Between the smallest budget and the peak, a plan that recomputes (or refuses with a
    PlanError when recomputing only) verifies and trains as the unlimited run does."""
    g = random_graph(seed)
    facts = GraphFacts(g)
    alloc = facts.minimal_allocation
    for extra in (0, 1, 2):
        alloc = Allocation(alloc.sizes, alloc.cls, alloc.cnt + extra)
        try:
            p = plan(g, facts.order, alloc, facts.scratch.bytes, profile, options=options)
        except PlanError:
            assert options.recompute_only
            continue
        verify(p, g)
        if p.recomputes:
            assert trains_as_unlimited(g, p), f"seed {seed}, {extra} objects more"


def test_swapadvisor_recomputes_unless_swap_only_even_through_its_search():
    """The joint plan recomputes where copies are slow, and is faster; --swap-only (the policy
    option recompute 0) holds for every candidate of the search and for the plan it returns."""
    g = late_reader_graph()
    smallest = GraphFacts(g).smallest_budget
    swapadvisor = policy.get("swapadvisor")
    joint = plan_policy(g, swapadvisor, SLOW_LINK, smallest)
    swap_only = plan_policy(g, swapadvisor, SLOW_LINK, smallest, policy_options={RECOMPUTE_OPTION: 0.0})
    assert joint.program.recomputes > 0 and swap_only.program.recomputes == 0
    assert joint.seconds < swap_only.seconds
    search = SearchOptions(seed=0, max_generations=3, population=6, workers=1, progress=False, ideal=False)
    result = ga_search(GraphFacts(g), joint.budget, SLOW_LINK, replace(search, policy_options=((RECOMPUTE_OPTION, 0.0),)))
    request = result.request(g, GraphFacts(g), joint.budget, SLOW_LINK)
    assert request.policy_options[RECOMPUTE_OPTION] == 0.0 and swapadvisor.make(request).recomputes == 0


def test_a_node_of_several_outputs_is_recomputed_whole_and_verifies():
    """Recomputing only (checkpoint), the tiny LSTM's gates come back through their split, run
    again whole (``PlanOptions.several_outputs``); the plan verifies. (Training it bit-identically
    is tests/planner/test_end_to_end.py's; here the pass runs again under NUMBA_BOUNDSCHECK in CI.)"""
    import zoo
    from planner.policy import plan_with
    from .test_end_to_end import PROFILE, checkpoint_budgets

    g = zoo.tiny("rnn")
    budget = checkpoint_budgets(g, GraphFacts(g))[0]
    program = plan_with("checkpoint", g, budget, PROFILE)
    verify(program, g, budget)
    several = [i for i in program.instrs if i.recompute and len(g.nodes[i.target].outputs) > 1]
    assert several and all(len(i.objects) == len(g.nodes[i.target].inputs) + len(g.nodes[i.target].outputs)
                           for i in several)
