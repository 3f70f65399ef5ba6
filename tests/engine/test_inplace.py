"""engine/inplace.py: the one in-place rule."""
import numpy as np

from engine.inplace import InPlace, in_place_input, in_place_pairs
from engine.ir import Graph
from engine.liveness import lifetimes, positions


def graph():
    g = Graph("inplace")
    a = g.input("a", (4,))
    b = g.input("b", (4,))
    (s,) = g.apply("accumulate", [a, b], name="s")
    (t,) = g.apply("accumulate", [b, b], name="t")     # the input to overwrite is read twice
    (r,) = g.apply("relu", [a], name="r")
    return g


def test_the_declaration_alone_says_what_may_be_overwritten():
    g = graph()
    s, t, r = (g.nodes[g.node_id(n)] for n in ("s", "t", "r"))
    assert in_place_input(s, 0) == 0 and in_place_pairs(s) == [(0, 0)]
    assert in_place_input(r, 0) is None and in_place_pairs(r) == []


def _taken(g, order, kept=()):
    decl = InPlace.of(g)
    last = lifetimes(g, order).end
    keep = np.zeros(len(g.tensors), dtype=bool)
    keep[list(kept)] = True
    return {g.nodes[n].name for n, use in zip(decl.node.tolist(), decl.taken(positions(g, order), last, keep)) if use}


def test_a_plan_takes_the_memory_only_when_the_input_dies_there_and_is_read_once():
    g = graph()
    order = [g.node_id(n) for n in ("s", "t", "r")]
    decl = InPlace.of(g)
    assert decl.eligible.tolist() == [True, False]        # t reads b twice
    assert _taken(g, order) == set()                       # a is read again by r
    g2 = Graph("dies")
    a, b = g2.input("a", (4,)), g2.input("b", (4,))
    g2.apply("accumulate", [a, b], name="s")
    assert _taken(g2, [0]) == {"s"}
    assert _taken(g2, [0], kept=[a]) == set()             # a must survive the iteration


def test_liveness_and_the_rule_agree():
    g = Graph("chain")
    a, b = g.input("a", (4,)), g.input("b", (4,))
    (s,) = g.apply("accumulate", [a, b], name="s")
    (u,) = g.apply("accumulate", [s, b], name="u")
    g.set_loss(u)
    lt = lifetimes(g, [0, 1])
    assert lt.inplace_of[s] == a and lt.inplace_of[u] == s
