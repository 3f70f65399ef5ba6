import numpy as np

from engine.ir import Graph
from engine.profile import Link, Profile, analytic_profile
from engine.program import COMPUTE, SWAP_IN, Arena, Instr, Program
from planner.dispatch import run_streams
from planner.facts import GraphFacts
from planner.policy import plan_with
from planner.simulate import simulate
from planner.stream_order import order_copies, urgency
from planner.verify import verify

MB = 1_000_000
PROFILE = Profile("toy", Link(h2d_bytes_per_s=1 * MB, d2h_bytes_per_s=1 * MB, duplex_bytes_per_s=1.5 * MB,
                              latency_s=0.0))


def toy():
    """r0 then r1; x and y are 1 MB host tensors. The planner emitted the swap-in of x (into an
    object r0 must release first, needed by nobody soon) before the swap-in of y (into a free
    object, needed by r1)."""
    g = Graph("toy")
    x = g.input("x", (MB // 4,))
    y = g.input("y", (MB // 4,))
    g.apply("relu", [x], name="r0")
    g.apply("relu", [y], name="r1")
    instrs = [Instr(COMPUTE, 0, objects=(0, 2)),
              Instr(SWAP_IN, x, 0, deps=[0]),
              Instr(SWAP_IN, y, 1),
              Instr(COMPUTE, 1, objects=(1, 2), deps=[2])]
    arena = Arena(np.zeros(3, np.int64), np.zeros(3, np.int64), 0)
    return g, Program("toy", [0, 1], arena, instrs, {})


def test_urgency_is_the_first_compute_that_waits():
    _, p = toy()
    assert urgency(p).tolist() == [0, 4, 3, 3]      # x: nothing waits (last); y: r1 at index 3


def test_a_ready_urgent_copy_goes_before_a_blocked_one():
    g, p = toy()
    secs = np.array([1.0, 1.0])
    before = simulate(p, g, PROFILE, secs).total
    q = order_copies(p, g, PROFILE, secs)
    assert [(ins.kind, ins.target) for ins in q.instrs if ins.kind == SWAP_IN] == [(SWAP_IN, 1), (SWAP_IN, 0)]
    after = simulate(q, g, PROFILE, secs).total
    assert (before, after) == (4.0, 2.0)


def test_in_order_replay_of_the_dispatch_order_gives_the_same_timeline(lstm_graph):
    """The reordered Program, run on in-order streams, reproduces the dispatch loop's timeline,
    and the verifier accepts it (every ordering it needs is an edge or stream order)."""
    g = lstm_graph
    facts = GraphFacts(g)
    profile = analytic_profile("v100")
    secs = profile.node_seconds(g)
    budget = facts.smallest_budget
    p = plan_with("swapadvisor", g, budget, profile, facts=facts)
    verify(p, g, budget)
    start, finish, order = run_streams(p, g, profile, secs, urgency(p), in_order=(COMPUTE,))
    assert order == list(range(len(p.instrs)))          # already in its own dispatch order
    t = simulate(p, g, profile, secs)
    assert np.array_equal(t.finish, finish) and np.array_equal(t.start, start)
