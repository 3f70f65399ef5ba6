"""ops/activation.py: GELU (tanh approximation) and its gradient."""
import math

import numpy as np
import pytest

from ops import registry
from ops.registry import ShapeError

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
