"""ops/optim.py's adam_update against the textbook formulas (Kingma and Ba, Algorithm 1;
AdamW's decoupled decay, Loshchilov and Hutter), in float64."""
import numpy as np
import pytest

from ops import registry
from ops.registry import OpError, ShapeError

from .opcheck import run_op

rng = np.random.default_rng(0)
HYPER = dict(lr=1e-2, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.1)


def textbook(w, grad, m, v, t, lr, beta1, beta2, eps, weight_decay, decoupled):
    """One step from step count t-1 to t."""
    if not decoupled:
        grad = grad + weight_decay * w
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad ** 2
    m_hat = m / (1 - beta1 ** t)
    v_hat = v / (1 - beta2 ** t)
    if decoupled:
        w = w - lr * weight_decay * w
    return w - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


@pytest.mark.parametrize("decoupled", [True, False])
def test_five_steps_follow_the_textbook(decoupled):
    w = expect_w = rng.standard_normal(40)
    m = v = expect_m = expect_v = np.zeros(40)
    step = np.zeros(())
    for t in range(1, 6):
        grad = rng.standard_normal(40)
        w, m, v, step = run_op("adam_update", [w, grad, m, v, step], decoupled=decoupled, **HYPER)
        expect_w, expect_m, expect_v = textbook(expect_w, grad, expect_m, expect_v, t, decoupled=decoupled, **HYPER)
        assert float(step) == t
        np.testing.assert_allclose(m, expect_m, rtol=1e-14, atol=1e-16)
        np.testing.assert_allclose(v, expect_v, rtol=1e-14, atol=1e-16)
        np.testing.assert_allclose(w, expect_w, rtol=1e-14, atol=1e-16)


def test_float32_stays_float32():
    args = [rng.standard_normal(9).astype(np.float32) for _ in range(2)] + [np.zeros(9, np.float32)] * 2
    outs = run_op("adam_update", args + [np.zeros((), np.float32)])
    assert all(o.dtype == np.float32 for o in outs)


def test_declaration_and_errors():
    decl = registry.get("adam_update")
    assert decl.state_outputs == {0: 0, 1: 2, 2: 3, 3: 4} and not decl.differentiable
    assert decl.canon({})["decoupled"] is True
    with pytest.raises(OpError, match=r"beta2 must lie in \[0, 1\)"):
        decl.canon({"beta2": 1.0})
    with pytest.raises(OpError, match="eps must be positive"):
        decl.canon({"eps": 0})
    with pytest.raises(OpError, match="decoupled must be a bool"):
        decl.canon({"decoupled": "yes"})
    z = np.zeros(3)
    with pytest.raises(ShapeError, match="step must be a scalar"):
        decl.infer({}, [z, z, z, z, np.zeros(1)])
    with pytest.raises(ShapeError, match="one shape"):
        decl.infer({}, [z, z, np.zeros(4), z, np.zeros(())])
