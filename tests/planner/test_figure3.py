"""SwapAdvisor's Figure 3 (Section 4.2), planned and simulated as the paper draws it.

op1 = tanh(W1) -> A1, op2 = mul(A1, W2) -> A2, op3 = sum(W3, A1, A2) -> A3; every tensor
one unit; one size class of four one-unit objects; schedule op1, op2, op3; one time unit per
operator and per unit moved one way, both directions at once. The paper's plan: W1 -> W3
and W2 -> A3 (the parameters stay resident until evicted), W2 prefetched during op1, W3
while op2 runs: 4 time units."""
import numpy as np

from allocator import Allocation
from engine.ir import Graph
from engine.profile import Link, Profile
from engine.program import COMPUTE, SWAP_IN
from planner.policies import swapadvisor
from planner.simulate import simulate
from planner.swap_planner import plan
from planner.verify import verify

UNIT = 1024            # bytes of every tensor


def figure3():
    g = Graph("figure3")
    w1, w2, w3 = (g.parameter(f"W{i}", (UNIT // 4,)) for i in (1, 2, 3))
    (a1,) = g.apply("tanh", [w1], name="op1")
    (a2,) = g.apply("mul", [a1, w2], name="op2")
    g.apply("sum_n", [w3, a1, a2], name="op3")
    return g


def test_figure3_takes_four_time_units_with_the_papers_victims():
    g = figure3()
    profile = Profile("figure3", Link(h2d_bytes_per_s=UNIT, d2h_bytes_per_s=UNIT, duplex_bytes_per_s=2 * UNIT,
                                      latency_s=0.0))
    secs = np.ones(len(g.nodes))
    alloc = Allocation(np.array([UNIT]), np.array([0]), np.array([4]))
    p = plan(g, g.default_order(), alloc, 0, profile, secs, swapadvisor.OPTIONS)
    verify(p, g, 4 * UNIT)
    t = simulate(p, g, profile, secs)
    assert t.total == 4.0
    name = {i: g.tensors[i].name for i in range(len(g.tensors))}
    compute = {g.nodes[ins.target].name: ins for ins in p.instrs if ins.kind == COMPUTE}
    obj_of = {name[ins.target]: ins.obj for ins in p.instrs if ins.kind == SWAP_IN}
    a3_obj = compute["op3"].objects[-1]
    assert obj_of["W3"] == obj_of["W1"]          # W1 -> W3
    assert a3_obj == obj_of["W2"]                # W2 -> A3
    swap_in_start = {name[ins.target]: t.start[i] for i, ins in enumerate(p.instrs) if ins.kind == SWAP_IN}
    assert swap_in_start == {"W1": 0.0, "W2": 1.0, "W3": 2.0}
