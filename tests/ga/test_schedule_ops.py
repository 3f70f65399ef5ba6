
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.graph_check import check_order
from ga.context import GraphContext
from ga.schedule_ops import crossover, mutate, random_crossover, random_schedule, segment_crossover

from .helpers import dags, lstm, lstm_context


def paper(nodes):
    """Paper node ids (1-based) to ours (0-based)."""
    return [v - 1 for v in nodes]


# Figure 4's graph as far as the text fixes it: five nodes; SCH2 starts with 2, 3, 4 and the
# children are topological, so node 1 precedes none of 2, 3, 4. Edges (1-based): 2->3, 2->4,
# 4->5; node 1 (a source) is free. SCH1 and SCH2 are two of its topological orders.
FIG4 = GraphContext.synthetic(5, [(1, 2), (1, 3), (3, 4)])
SCH1 = paper([1, 2, 4, 5, 3])
SCH2 = paper([2, 3, 4, 5, 1])


def test_figure4_crossover():
    assert FIG4.check_order(SCH1) and FIG4.check_order(SCH2)
    child1, child2 = crossover(SCH1, SCH2, 3)  # CR = 3
    # Child 1: SCH2[1..3] = [2, 3, 4], then nodes 1 and 5 in SCH1's order.
    assert child1.tolist() == paper([2, 3, 4, 1, 5])
    # Child 2: SCH1[1..3] = [1, 2, 4], then nodes 3 and 5 in SCH2's order.
    assert child2.tolist() == paper([1, 2, 4, 3, 5])
    assert FIG4.check_order(child1) and FIG4.check_order(child2)
    assert child1.dtype == np.int32


def test_crossover_at_the_ends_copies_the_parents():
    c1, c2 = crossover(SCH1, SCH2, 0)
    assert c1.tolist() == SCH1 and c2.tolist() == SCH2
    c1, c2 = crossover(SCH1, SCH2, 5)
    assert c1.tolist() == SCH2 and c2.tolist() == SCH1
    with pytest.raises(ValueError, match="outside"):
        crossover(SCH1, SCH2, 6)
    with pytest.raises(ValueError, match="differ in length"):
        crossover(SCH1, SCH2[:4], 2)


def test_mutation_with_probability_zero_returns_the_parent():
    rng = np.random.default_rng(0)
    assert mutate(FIG4, SCH1, 0.0, rng).tolist() == SCH1
    ctx = lstm_context()
    parent = random_schedule(ctx, rng)
    np.testing.assert_array_equal(mutate(ctx, parent, 0.0, rng), parent)
    # A tiny probability changes few positions: it mostly follows the parent.
    child = mutate(ctx, parent, 0.01, np.random.default_rng(1))
    assert np.mean(child == parent) > 0.5


def test_mutation_picks_the_earliest_ready_node_otherwise():
    # Two independent chains; the parent alternates them. Without mutation the scheduler
    # reproduces the parent even though other nodes are ready at every step.
    ctx = GraphContext.synthetic(6, [(0, 1), (1, 2), (3, 4), (4, 5)])
    parent = [3, 0, 4, 1, 5, 2]
    assert mutate(ctx, parent, 0.0, np.random.default_rng(0)).tolist() == parent
    orders = {tuple(mutate(ctx, parent, 1.0, np.random.default_rng(s)).tolist()) for s in range(40)}
    assert len(orders) > 5 and all(ctx.check_order(o) for o in orders)


def test_mutation_rejects_a_schedule_of_the_wrong_length():
    with pytest.raises(ValueError, match="graph has 5"):
        mutate(FIG4, [0, 1], 0.5, np.random.default_rng(0))


def test_same_seed_same_children():
    ctx = lstm_context()
    a = random_schedule(ctx, np.random.default_rng(3))
    b = random_schedule(ctx, np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(mutate(ctx, a, 0.3, np.random.default_rng(9)),
                                  mutate(ctx, b, 0.3, np.random.default_rng(9)))


@settings(max_examples=60, deadline=None)
@given(dags(), st.integers(0, 2**32 - 1), st.floats(0.0, 1.0))
def test_children_of_random_dags_are_topological(dag, seed, prob):
    n, edges = dag
    ctx = GraphContext.synthetic(n, edges)
    rng = np.random.default_rng(seed)
    p1, p2 = random_schedule(ctx, rng), random_schedule(ctx, rng)
    assert ctx.check_order(p1) and ctx.check_order(p2)
    for child in random_crossover(p1, p2, rng):
        assert ctx.check_order(child)
        assert ctx.check_order(mutate(ctx, child, prob, rng))


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 239), st.floats(0.0, 1.0))
def test_children_on_the_lstm_graph_are_topological(seed, point, prob):
    g, ctx = lstm(), lstm_context()
    rng = np.random.default_rng(seed)
    p1, p2 = random_schedule(ctx, rng), mutate(ctx, np.arange(ctx.num_nodes), prob, rng)
    for child in crossover(p1, p2, point):
        check_order(g, child.tolist())
        assert ctx.check_order(child)
        mutated = mutate(ctx, child, prob, rng)
        check_order(g, mutated.tolist())
        assert ctx.check_order(mutated)


def test_operators_keep_orders_valid_on_ten_thousand_nodes():
    n = 10_000
    rng = np.random.default_rng(0)
    # A layered DAG: each node depends on up to 3 earlier nodes nearby.
    edges = [(int(u), v) for v in range(1, n) for u in set(rng.integers(max(0, v - 50), v, size=3))]
    ctx = GraphContext.synthetic(n, edges)
    p1 = random_schedule(ctx, rng)
    p2 = mutate(ctx, p1, 0.1, rng)
    c1, c2 = random_crossover(p1, p2, rng)
    mutate(ctx, c1, 0.1, rng)
    assert ctx.check_order(c2)      # how fast: bench.plan_speed's question, not a timed test (issue 39)


def test_segment_crossover_moves_the_other_parent_s_stretch_whole():
    ctx = GraphContext.synthetic(6)                  # no edges: any order is topological
    a, b = [0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0]
    c1, c2 = segment_crossover(ctx, a, b, 2, 4)      # b[2:4] = [3, 2]; a[2:4] = [2, 3]
    assert c1.tolist() == [0, 1, 3, 2, 4, 5]
    assert c2.tolist() == [5, 4, 2, 3, 1, 0]
    assert segment_crossover(ctx, a, b, 0, 6)[0].tolist() == b       # the whole of the other parent
    assert segment_crossover(ctx, a, b, 3, 3)[0].tolist() == a       # an empty segment: the parent


def test_segment_crossover_waits_for_predecessors():
    ctx = GraphContext.synthetic(4, [(0, 3)])        # 3 after 0
    c1, _ = segment_crossover(ctx, [1, 2, 0, 3], [0, 3, 1, 2], 0, 2)   # takes [0, 3] to the front
    assert c1.tolist() == [0, 3, 1, 2]
    c1, _ = segment_crossover(ctx, [0, 1, 2, 3], [1, 2, 0, 3], 1, 2)   # [2] at position 1
    assert c1.tolist() == [0, 2, 1, 3]


@settings(max_examples=60, deadline=None)
@given(dags(), st.integers(0, 2**32 - 1))
def test_segment_crossover_children_are_topological(dag, seed):
    n, edges = dag
    ctx = GraphContext.synthetic(n, edges)
    rng = np.random.default_rng(seed)
    s1, s2 = random_schedule(ctx, rng), random_schedule(ctx, rng)
    a, b = sorted(int(x) for x in rng.integers(0, n + 1, 2))
    for child in segment_crossover(ctx, s1, s2, a, b):
        assert ctx.check_order(child) and child.dtype == np.int32


def test_segment_crossover_checks_its_inputs():
    ctx = GraphContext.synthetic(3)
    with pytest.raises(ValueError, match="segment"):
        segment_crossover(ctx, [0, 1, 2], [2, 1, 0], 2, 1)
    with pytest.raises(ValueError, match="length"):
        segment_crossover(ctx, [0, 1, 2], [1, 0], 0, 1)
