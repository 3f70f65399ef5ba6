import numpy as np
import pytest

import ops.optim  # noqa: F401  (registers the operators)
from ops import registry
from ops.registry import OpError, ShapeError

from .opcheck import run_op

rng = np.random.default_rng(0)


def formula(w, grad, m, lr, momentum, weight_decay):
    t = w.dtype.type
    m_next = t(momentum) * m + grad + t(weight_decay) * w
    return w - t(lr) * m_next, m_next


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lr,momentum,weight_decay", [(0.05, 0.9, 0.0), (0.1, 0.0, 1e-4), (0.3, 0.99, 5e-4)])
def test_sgd_update_is_bit_exact(dtype, lr, momentum, weight_decay):
    w, grad, m = (rng.standard_normal((3, 5)).astype(dtype) for _ in range(3))
    attrs = dict(lr=lr, momentum=momentum, weight_decay=weight_decay)
    w_next, m_next = run_op("sgd_update", [w, grad, m], **attrs)
    expect_w, expect_m = formula(w, grad, m, **attrs)
    assert w_next.dtype == dtype and m_next.dtype == dtype
    assert np.array_equal(m_next, expect_m) and np.array_equal(w_next, expect_w)


def test_repeated_updates_stay_bit_exact():
    attrs = dict(lr=0.05, momentum=0.9, weight_decay=1e-4)
    w = expect_w = rng.standard_normal(17).astype(np.float32)
    m = expect_m = np.zeros(17, np.float32)
    for _ in range(5):
        grad = rng.standard_normal(17).astype(np.float32)
        w, m = run_op("sgd_update", [w, grad, m], **attrs)
        expect_w, expect_m = formula(expect_w, grad, expect_m, **attrs)
    assert np.array_equal(w, expect_w) and np.array_equal(m, expect_m)


def test_sgd_update_declaration():
    decl = registry.get("sgd_update")
    assert decl.state_outputs == {0: 0, 1: 2}
    assert not decl.differentiable
    assert decl.canon({}) == {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.0}


def test_sgd_update_errors():
    decl = registry.get("sgd_update")
    with pytest.raises(OpError, match="lr must be non-negative"):
        decl.canon({"lr": -0.1})
    with pytest.raises(OpError, match=r"momentum must lie in \[0, 1\)"):
        decl.canon({"momentum": 1.0})
    with pytest.raises(OpError, match="weight_decay"):
        decl.canon({"weight_decay": -1})
    with pytest.raises(OpError, match="unknown"):
        decl.canon({"nesterov": True})
    with pytest.raises(ShapeError, match=r"one shape, got \(3,\), \(3,\), \(4,\)"):
        decl.infer({}, [np.zeros(3), np.zeros(3), np.zeros(4)])
    with pytest.raises(ShapeError, match="dtypes"):
        decl.infer({}, [np.zeros(3, np.float32), np.zeros(3), np.zeros(3, np.float32)])
