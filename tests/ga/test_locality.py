import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ga.context import GraphContext, _csr
from ga.fitness import Evaluator
from ga.locality import locality_order
from ga.population import Breeder, Individual, Variation
from ga.schedule_ops import random_schedule
from planner.allocation import simple_allocation
from zoo import small

from .helpers import PROFILE, budget_of, dags, lstm, lstm_context, tight_budget


def with_tensors(ctx: GraphContext, inputs, outputs, nbytes) -> GraphContext:
    """``ctx`` given per-node input and output tensor lists and per-tensor bytes."""
    ctx.input_ptr, ctx.inputs = _csr(inputs)
    ctx.output_ptr, ctx.outputs = _csr(outputs)
    ctx.tensor_bytes = np.asarray(nbytes, dtype=np.float64)
    return ctx


def two_chains() -> GraphContext:
    """Chains a0 -> a1 -> a2 and b0 -> b1 -> b2 (nodes 0-2 and 3-5); each step of a chain reads
    its chain's weight (tensor 0: A's, 1 GB; tensor 1: B's) and the previous step's output."""
    ctx = GraphContext.synthetic(6, [(0, 1), (1, 2), (3, 4), (4, 5)])
    # Tensors: 0 = WA, 1 = WB, 2..7 = the outputs of nodes 0..5 (1 KB each).
    inputs = [[0], [0, 2], [0, 3], [1], [1, 5], [1, 6]]
    outputs = [[2 + v] for v in range(6)]
    return with_tensors(ctx, inputs, outputs, [1e9, 1e9] + [1e3] * 6)


def test_a_hot_weight_keeps_its_chain_running():
    ctx = two_chains()
    interleaved = [0, 3, 1, 4, 2, 5]
    assert locality_order(ctx, interleaved, 4).tolist() == [0, 1, 2, 3, 4, 5]
    # B first in the parent: B's chain runs through, then A's.
    assert locality_order(ctx, [3, 0, 4, 1, 5, 2], 4).tolist() == [3, 4, 5, 0, 1, 2]


def test_a_window_of_zero_returns_the_parent():
    ctx = two_chains()
    assert locality_order(ctx, [0, 3, 1, 4, 2, 5], 0).tolist() == [0, 3, 1, 4, 2, 5]


def test_without_tensors_the_parent_comes_back():
    ctx = GraphContext.synthetic(3, [(0, 1)])
    out = locality_order(ctx, [2, 0, 1], 10)
    assert out.tolist() == [2, 0, 1] and out.dtype == np.int32


@settings(max_examples=40, deadline=None)
@given(dags(), st.integers(0, 2**32 - 1), st.integers(0, 30))
def test_always_a_topological_order(dag, seed, window):
    n, edges = dag
    rng = np.random.default_rng(seed)
    ctx = GraphContext.synthetic(n, edges)
    tensors = int(rng.integers(1, 8))
    inputs = [list(dict.fromkeys(rng.integers(0, tensors, rng.integers(0, 4)).tolist())) for _ in range(n)]
    outputs = [rng.integers(0, tensors, rng.integers(0, 2)).tolist() for _ in range(n)]
    with_tensors(ctx, inputs, outputs, rng.integers(1, 1000, tensors))
    parent = random_schedule(ctx, rng)
    out = locality_order(ctx, parent, window)
    assert ctx.check_order(out) and sorted(out.tolist()) == list(range(n))


def hot_bytes(ctx: GraphContext, order, window: int) -> float:
    """Bytes of inputs read within ``window`` steps of their last touch, over ``order``."""
    last, hot = {}, 0.0
    for step, v in enumerate(order):
        ins = ctx.inputs[ctx.input_ptr[v]:ctx.input_ptr[v + 1]]
        hot += sum(ctx.tensor_bytes[t] for t in ins if step - last.get(t, -10**9) <= window)
        for t in [*ins, *ctx.outputs[ctx.output_ptr[v]:ctx.output_ptr[v + 1]]]:
            last[t] = step
    return hot


def test_on_an_lstm_more_bytes_are_read_hot_than_in_random_parents():
    """Three layers whose weights (64 KB a step) outweigh the activations (2 KB), as in the
    paper's RNNs: measured 1.21-1.43x the parents' hot bytes."""
    ctx = GraphContext.from_graph(small.lstm(batch=2, steps=6, features=8, hidden=64, layers=3, classes=3))
    rng = np.random.default_rng(0)
    for _ in range(5):
        parent = random_schedule(ctx, rng)
        child = locality_order(ctx, parent, 8)
        assert ctx.check_order(child)
        assert hot_bytes(ctx, child, 8) > 1.15 * hot_bytes(ctx, parent, 8)


def test_the_breeder_applies_it_to_schedule_children_only_when_asked():
    g = lstm()
    facts, budget = budget_of(g, tight_budget(g) * 2)
    ctx = lstm_context()
    simple = simple_allocation(facts, budget, PROFILE)
    rng = np.random.default_rng(1)
    p1 = p2 = Individual(random_schedule(ctx, rng), simple)
    plain = Breeder(ctx, Evaluator(facts, PROFILE, budget), Variation(locality=0.0), 0, simple)
    always = Breeder(ctx, Evaluator(facts, PROFILE, budget), Variation(locality=1.0), 0, simple)
    a, b = plain.schedule_child(1, 0, 0, p1, p2), always.schedule_child(1, 0, 0, p1, p2)
    assert ctx.check_order(b) and not np.array_equal(a, b)
    assert np.array_equal(b, always.schedule_child(1, 0, 0, p1, p2))     # reproducible


def test_the_probability_is_checked():
    with pytest.raises(ValueError, match="locality"):
        Variation(locality=1.5)
