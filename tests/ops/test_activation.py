"""ops/activation.py: GELU (tanh approximation) and its gradient."""
import math

import numpy as np
import pytest

from ops import registry
from ops.registry import OpError, ShapeError

from .opcheck import check_gradient, run_op

rng = np.random.default_rng(0)


def test_gelu_matches_the_tanh_formula():
    x = rng.standard_normal(50) * 3
    (y,) = run_op("gelu", [x])
    expect = [0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))) for v in x]
    np.testing.assert_allclose(y, expect, rtol=1e-14, atol=1e-15)


def test_gelu_gradient():
    check_gradient("gelu", [rng.standard_normal((4, 7)) * 2])


def test_gelu_grad_shapes_must_match():
    with pytest.raises(ShapeError, match="must match"):
        registry.get("gelu_grad").infer({}, [np.zeros(3), np.zeros(4)])


def test_gelu_tanh_is_the_default_and_leaves_attributes_unchanged():
    for op in ("gelu", "gelu_grad"):
        assert registry.get(op).canon({}) == {} and registry.get(op).canon({"approximate": "tanh"}) == {}
        assert registry.get(op).canon({"approximate": "none"}) == {"approximate": "none"}
        with pytest.raises(OpError, match="approximate must be one of"):
            registry.get(op).canon({"approximate": "erf"})


def test_exact_gelu_matches_the_erf_formula():
    x = rng.standard_normal(50) * 3
    (y,) = run_op("gelu", [x], approximate="none")
    expect = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x]
    np.testing.assert_allclose(y, expect, rtol=1e-14, atol=1e-15)
    (y32,) = run_op("gelu", [x.astype(np.float32)], approximate="none")
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, expect, rtol=1e-6, atol=1e-7)


def test_exact_gelu_gradient():
    check_gradient("gelu", [rng.standard_normal((4, 7)) * 2], {"approximate": "none"})


def test_exact_gelu_of_a_scalar():
    (y,) = run_op("gelu", [np.array(0.5)], approximate="none")
    assert y.shape == () and y == pytest.approx(0.25 * (1 + math.erf(0.5 / math.sqrt(2))), rel=1e-15)
