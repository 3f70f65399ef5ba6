import numpy as np
import pytest

from engine import reference
from engine.arrays import ALIGNMENT
from engine.ir import Graph, GraphError


def chain():
    g = Graph()
    x = g.input("x", (3, 3))
    (a,) = g.apply("relu", [x], name="a")
    (b,) = g.apply("tanh", [a], name="b")
    (c,) = g.apply("add", [a, b], name="c")
    return g, x, a, b, c


def test_runs_and_frees_what_is_not_kept():
    g, x, a, b, c = chain()
    v = np.arange(9.0, dtype=np.float32).reshape(3, 3) - 4
    out = reference.run(g, {x: v}, keep=[c])
    assert set(out) == {c}
    assert np.array_equal(out[c], np.maximum(v, 0) + np.tanh(np.maximum(v, 0)))
    assert set(reference.run(g, {x: v})) == {x, a, b, c}


def test_outputs_are_aligned_like_pool_objects():
    g, x, a, b, c = chain()
    out = reference.run(g, {x: np.ones((3, 3), np.float32)})
    assert all(out[t].ctypes.data % ALIGNMENT == 0 for t in (a, b, c))


def test_bad_feeds_and_orders():
    g, x, *_ = chain()
    with pytest.raises(GraphError, match="no value fed for tensor 'x'"):
        reference.run(g, {})
    with pytest.raises(GraphError, match="expected \\(3, 3\\) float32"):
        reference.run(g, {x: np.zeros((3, 3))})
    with pytest.raises(GraphError, match="before its input's producer"):
        reference.run(g, {x: np.zeros((3, 3), np.float32)}, order=[1, 0, 2])


def test_last_use_positions():
    g, x, a, b, c = chain()
    last = reference.last_use_positions(g, [0, 1, 2])
    assert last[[x, a, b, c]].tolist() == [0, 2, 2, -1]
