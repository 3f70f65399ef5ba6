from types import SimpleNamespace

import numpy as np
import pytest

import ops.norm  # noqa: F401  (registers the operators)
from ops import registry
from ops.registry import OpError, ShapeError

from .opcheck import Eager, check_gradient, run_op

rng = np.random.default_rng(0)


def bn_inputs(shape, dtype=np.float64):
    c = shape[1]
    return [rng.standard_normal(shape).astype(dtype),
            (1 + 0.5 * rng.standard_normal(c)).astype(dtype),
            rng.standard_normal(c).astype(dtype),
            rng.standard_normal(c).astype(dtype),
            (1 + rng.random(c)).astype(dtype)]


@pytest.mark.parametrize("shape", [(4, 3), (7, 1), (2, 3, 4, 5), (3, 2, 1, 3)])
def test_batch_norm_gradient(shape):
    grads = check_gradient("batch_norm", bn_inputs(shape), wrt=[0, 1, 2])
    assert grads[3] is None and grads[4] is None


def test_batch_norm_gradient_honours_wanted():
    grads = check_gradient("batch_norm", bn_inputs((5, 4)), wrt=[1])
    assert grads[0] is None and grads[2] is None


def test_batch_norm_forward_matches_formula():
    x, gamma, beta, rmean, rvar = bn_inputs((4, 3, 2, 5))
    y, mean, invstd, mean_next, var_next = run_op("batch_norm", [x, gamma, beta, rmean, rvar],
                                                  eps=1e-3, momentum=0.8)
    axes = (0, 2, 3)
    expect_mean = x.mean(axis=axes)
    var = x.var(axis=axes)
    per_c = (1, 3, 1, 1)
    xhat = (x - expect_mean.reshape(per_c)) / np.sqrt(var.reshape(per_c) + 1e-3)
    np.testing.assert_allclose(y, xhat * gamma.reshape(per_c) + beta.reshape(per_c), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mean, expect_mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(invstd, 1 / np.sqrt(var + 1e-3), rtol=1e-12)
    # Running statistics: the variance is the unbiased one.
    np.testing.assert_allclose(mean_next, 0.8 * rmean + 0.2 * expect_mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(var_next, 0.8 * rvar + 0.2 * x.var(axis=axes, ddof=1), rtol=1e-12)


def test_batch_norm_2d_float32():
    ins = bn_inputs((16, 6), np.float32)
    y, mean, invstd, mean_next, var_next = run_op("batch_norm", ins)
    assert all(a.dtype == np.float32 for a in (y, mean, invstd, mean_next, var_next))
    np.testing.assert_allclose(y.mean(axis=0), ins[2], atol=1e-5)
    np.testing.assert_allclose(y.std(axis=0), np.abs(ins[1]), rtol=1e-3)
    np.testing.assert_allclose(var_next, 0.9 * ins[4] + 0.1 * ins[0].var(axis=0, ddof=1), rtol=1e-5)
    assert np.array_equal(run_op("batch_norm", ins)[0], y)   # deterministic


def test_batch_norm_declares_state_outputs():
    decl = registry.get("batch_norm")
    assert decl.state_outputs == {3: 3, 4: 4}
    assert not registry.get("batch_norm_grad").differentiable


def test_batch_norm_statistics_carry_no_gradient():
    ev = Eager()
    ids = [ev.const(a) for a in bn_inputs((4, 2))]
    outs = ev.apply("batch_norm", ids)
    dys = [None, ev.const(np.ones(2)), None, None, None]
    node = SimpleNamespace(op="batch_norm", attrs=ev.last_attrs, inputs=tuple(ids), outputs=outs)
    with pytest.raises(OpError, match="only output 0"):
        registry.get("batch_norm").gradient(ev, node, dys, [True] * 5)


def test_batch_norm_errors():
    decl = registry.get("batch_norm")
    attrs = decl.canon({})
    assert attrs == {"eps": 1e-5, "momentum": 0.9}
    x3 = bn_inputs((2, 3, 4))
    with pytest.raises(ShapeError, match=r"\[N,C\] or \[N,C,H,W\]"):
        decl.infer(attrs, x3)
    bad_gamma = bn_inputs((4, 3))
    bad_gamma[1] = np.ones(4)
    with pytest.raises(ShapeError, match=r"gamma must have shape \(3,\)"):
        decl.infer(attrs, bad_gamma)
    with pytest.raises(ShapeError, match="fewer than 2 values per channel"):
        decl.infer(attrs, bn_inputs((1, 3, 1, 1)))
    with pytest.raises(ShapeError, match="dtypes"):
        decl.infer(attrs, bn_inputs((4, 3))[:4] + [np.ones(3, np.float32)])
    with pytest.raises(OpError, match="eps"):
        decl.canon({"eps": 0})
    with pytest.raises(OpError, match="unknown"):
        decl.canon({"epsilon": 1e-3})
