"""ops/attention.py: batched products with transposes, the (causal, scaled) softmax, transpose."""
import numpy as np
import pytest

from ops import registry
from ops.registry import OpError, ShapeError

from .opcheck import check_gradient, run_op

rng = np.random.default_rng(0)


def _stored(shape, transposed):
    """An array whose last two axes, read transposed when asked, have ``shape``'s."""
    s = shape[:-2] + shape[-2:][::-1] if transposed else shape
    return rng.standard_normal(s)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_batch_matmul_forward_and_gradient(ta, tb):
    a, b = _stored((2, 3, 4, 5), ta), _stored((2, 3, 5, 6), tb)
    (c,) = run_op("batch_matmul", [a, b], transpose_a=ta, transpose_b=tb)
    opa = np.swapaxes(a, -1, -2) if ta else a
    opb = np.swapaxes(b, -1, -2) if tb else b
    assert c.shape == (2, 3, 4, 6)
    np.testing.assert_allclose(c, np.einsum("...mk,...kn->...mn", opa, opb), rtol=1e-12, atol=1e-12)
    check_gradient("batch_matmul", [a, b], dict(transpose_a=ta, transpose_b=tb))


def test_batch_matmul_errors():
    decl = registry.get("batch_matmul")
    attrs = decl.canon({})
    with pytest.raises(ShapeError, match="same batch dimensions"):
        decl.infer(attrs, [np.zeros((2, 3, 4)), np.zeros((3, 4, 5))])
    with pytest.raises(ShapeError, match="do not multiply"):
        decl.infer(attrs, [np.zeros((2, 3, 4)), np.zeros((2, 5, 5))])
    with pytest.raises(ShapeError, match="at least 2 dimensions"):
        decl.infer(attrs, [np.zeros(3), np.zeros((3, 1))])
    with pytest.raises(OpError, match="transpose_a must be a bool"):
        decl.canon({"transpose_a": 1})


def _softmax(x, scale, causal):
    z = x * scale
    if causal:
        z = np.where(np.triu(np.ones(x.shape[-2:], bool), 1), -np.inf, z)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("causal", [False, True])
def test_softmax_forward_and_gradient(causal):
    x = rng.standard_normal((2, 3, 5, 5)) * 3
    (y,) = run_op("softmax", [x], scale=0.7, causal=causal)
    np.testing.assert_allclose(y, _softmax(x, 0.7, causal), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(y.sum(axis=-1), 1.0, rtol=1e-13)
    if causal:
        assert np.all(y[..., np.triu(np.ones((5, 5), bool), 1)] == 0)
    check_gradient("softmax", [x], dict(scale=0.7, causal=causal))


def test_softmax_is_stable_for_large_scores():
    x = np.array([[1000.0, 999.0, -1000.0]])
    (y,) = run_op("softmax", [x])
    assert np.all(np.isfinite(y)) and y[0, 0] == pytest.approx(1 / (1 + np.exp(-1)))


def test_softmax_errors():
    decl = registry.get("softmax")
    with pytest.raises(ShapeError, match="square"):
        decl.infer(decl.canon({"causal": True}), [np.zeros((2, 3, 4))])
    with pytest.raises(OpError, match="scale must be finite and non-zero"):
        decl.canon({"scale": 0})
    with pytest.raises(ShapeError, match="floating-point"):
        decl.infer(decl.canon({}), [np.zeros((2, 3), np.int32)])
    grad = registry.get("softmax_grad")
    with pytest.raises(ShapeError, match="must match"):
        grad.infer(grad.canon({}), [np.zeros((2, 3)), np.zeros((3, 2))])


def test_transpose_forward_gradient_and_errors():
    x = rng.standard_normal((2, 3, 4, 5))
    (y,) = run_op("transpose", [x], axes=(0, 2, 1, 3))
    assert np.array_equal(y, x.transpose(0, 2, 1, 3))
    check_gradient("transpose", [x], dict(axes=(3, 0, 2, 1)))
    decl = registry.get("transpose")
    with pytest.raises(ShapeError, match="not a permutation"):
        decl.infer(decl.canon({"axes": (0, 0, 1)}), [np.zeros((2, 3, 4))])
    with pytest.raises(OpError, match="handle at most 4|handles at most 4"):
        decl.cuda_launches(decl.canon({"axes": (0, 1, 2, 3, 4)}), [np.zeros((1,) * 5, np.float32)],
                           [np.zeros((1,) * 5, np.float32)])
