import numpy as np
import pytest

from engine.initializers import initial_state, initial_value
from engine.ir import Graph, GraphError


def test_values_depend_on_seed_and_name_only():
    a = initial_value("w", "he_normal", (16, 8), "float32", 0)
    assert a.dtype == np.float32 and a.shape == (16, 8)
    assert np.array_equal(a, initial_value("w", "he_normal", (16, 8), "float32", 0))
    assert not np.array_equal(a, initial_value("w", "he_normal", (16, 8), "float32", 1))
    assert not np.array_equal(a, initial_value("v", "he_normal", (16, 8), "float32", 0))
    assert abs(a.std() - np.sqrt(2 / 8)) < 0.1


def test_named_initializers():
    assert (initial_value("b", "zeros", (3,), "float64", 0) == 0).all()
    assert (initial_value("g", "ones", (3,), "float64", 0) == 1).all()
    u = initial_value("u", "xavier_uniform", (40, 30), "float64", 0)
    assert np.abs(u).max() <= np.sqrt(6 / 70)
    assert abs(initial_value("n", "normal:0.01", (1000,), "float64", 0).std() - 0.01) < 0.002
    with pytest.raises(GraphError, match="unknown initializer 'bogus'"):
        initial_value("w", "bogus", (2,), "float32", 0)


def test_initial_state_covers_parameters_and_state():
    g = Graph()
    w = g.parameter("w", (2, 2))
    m = g.state("m", (2, 2))
    g.input("x", (2,))
    assert set(initial_state(g, 0)) == {w, m}
