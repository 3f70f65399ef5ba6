"""ops/layer_norm.py: layer and RMS normalization over the last axis."""
import numpy as np
import pytest

from ops import registry
from ops.registry import OpError, ShapeError

from .opcheck import check_gradient, run_op

rng = np.random.default_rng(0)


def ln_inputs(shape):
    d = shape[-1]
    return [rng.standard_normal(shape) * 2 + 1, 1 + 0.5 * rng.standard_normal(d), rng.standard_normal(d)]


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 5), (3, 1)])
def test_layer_norm_forward_matches_formula(shape):
    x, gamma, beta = ln_inputs(shape)
    y, mean, invstd = run_op("layer_norm", [x, gamma, beta], eps=1e-3)
    expect_mean = x.mean(axis=-1)
    expect_inv = 1 / np.sqrt(x.var(axis=-1) + 1e-3)
    np.testing.assert_allclose(mean, expect_mean, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(invstd, expect_inv, rtol=1e-13)
    np.testing.assert_allclose(y, (x - expect_mean[..., None]) * expect_inv[..., None] * gamma + beta,
                               rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 5)])
def test_layer_norm_gradient(shape):
    grads = check_gradient("layer_norm", ln_inputs(shape))
    assert all(g is not None for g in grads)


def test_layer_norm_gradient_honours_wanted():
    grads = check_gradient("layer_norm", ln_inputs((3, 4)), wrt=[1])
    assert grads[0] is None and grads[2] is None


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 5)])
def test_rms_norm_forward_and_gradient(shape):
    x, gamma, _ = ln_inputs(shape)
    y, invrms = run_op("rms_norm", [x, gamma], eps=1e-4)
    expect_inv = 1 / np.sqrt((x * x).mean(axis=-1) + 1e-4)
    np.testing.assert_allclose(invrms, expect_inv, rtol=1e-13)
    np.testing.assert_allclose(y, x * expect_inv[..., None] * gamma, rtol=1e-12, atol=1e-13)
    check_gradient("rms_norm", [x, gamma])


def test_parameter_gradients_add_rows_in_order():
    """dgamma and dbeta are left-to-right sums over the rows, as the column kernels add."""
    x, gamma, beta = (a.astype(np.float32) for a in ln_inputs((37, 5)))
    _, mean, invstd = run_op("layer_norm", [x, gamma, beta])
    dy = rng.standard_normal((37, 5)).astype(np.float32)
    _, dgamma, dbeta = run_op("layer_norm_grad", [x, gamma, mean, invstd, dy])
    xhat = (x - mean[:, None]) * invstd[:, None]
    expect_g, expect_b = np.zeros(5, np.float32), np.zeros(5, np.float32)
    for r in range(37):
        expect_g += dy[r] * xhat[r]
        expect_b += dy[r]
    assert np.array_equal(dgamma, expect_g) and np.array_equal(dbeta, expect_b)


def test_errors():
    ln = registry.get("layer_norm")
    with pytest.raises(ShapeError, match=r"gamma must have shape \(4,\)"):
        ln.infer({"eps": 1e-5}, [np.zeros((2, 4)), np.zeros(3), np.zeros(4)])
    with pytest.raises(ShapeError, match="non-empty last axis"):
        ln.infer({"eps": 1e-5}, [np.zeros((2, 0)), np.zeros(0), np.zeros(0)])
    with pytest.raises(OpError, match="eps must be positive"):
        ln.canon({"eps": 0})
    grad = registry.get("layer_norm_grad")
    with pytest.raises(ShapeError, match=r"mean must have shape \(2,\)"):
        grad.infer({}, [np.zeros((2, 4)), np.zeros(4), np.zeros(3), np.zeros(2), np.zeros((2, 4))])
    rms = registry.get("rms_norm_grad")
    with pytest.raises(ShapeError, match="dy has shape"):
        rms.infer({}, [np.zeros((2, 4)), np.zeros(4), np.zeros(2), np.zeros((2, 5))])
