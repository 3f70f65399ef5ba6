"""engine/inplace.py: the one in-place rule."""
from engine.inplace import in_place_input, in_place_pairs
from engine.ir import Graph


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


def test_a_plan_takes_the_memory_only_when_the_input_dies_there_and_is_read_once():
    g = graph()
    s, t = g.nodes[g.node_id("s")], g.nodes[g.node_id("t")]
    assert in_place_input(s, 0, dies=lambda x: True) == 0
    assert in_place_input(s, 0, dies=lambda x: False) is None
    assert in_place_input(t, 0, dies=lambda x: True) is None     # b is both operands
