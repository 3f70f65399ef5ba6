from types import SimpleNamespace

import numpy as np
import pytest

import ops.loss  # noqa: F401  (registers the operators)
from ops import registry
from ops.registry import OpError, ShapeError

from .opcheck import Eager, check_gradient, run_op

rng = np.random.default_rng(0)


def xent_inputs(n, c, label_dtype=np.int32, dtype=np.float64, scale=1.0):
    return [(scale * rng.standard_normal((n, c))).astype(dtype), rng.integers(0, c, n).astype(label_dtype)]


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("n,c", [(1, 5), (4, 3), (7, 10), (3, 1)])
def test_softmax_cross_entropy_gradient(n, c, label_dtype):
    grads = check_gradient("softmax_cross_entropy", xent_inputs(n, c, label_dtype))
    assert grads[1] is None


def test_softmax_cross_entropy_forward_matches_formula():
    logits, labels = xent_inputs(6, 4, scale=3.0)
    loss, probs = run_op("softmax_cross_entropy", [logits, labels])
    expect_probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(probs, expect_probs, rtol=1e-12)
    assert loss.shape == ()
    np.testing.assert_allclose(loss, -np.mean(np.log(expect_probs[np.arange(6), labels])), rtol=1e-12)


def test_softmax_cross_entropy_is_stable_for_large_logits():
    logits = np.array([[1000.0, 0.0, -1000.0], [-5e4, 5e4, 0.0]], np.float32)
    loss, probs = run_op("softmax_cross_entropy", [logits, np.array([0, 0], np.int64)])
    assert loss.dtype == np.float32 and probs.dtype == np.float32
    assert np.isfinite(probs).all() and loss == pytest.approx(0.5e5)
    np.testing.assert_array_equal(probs, [[1, 0, 0], [0, 1, 0]])


def test_gradient_kernel_matches_formula():
    logits, labels = xent_inputs(5, 3)
    _, probs = run_op("softmax_cross_entropy", [logits, labels])
    dloss = np.array(2.5)
    (dlogits,) = run_op("softmax_cross_entropy_grad", [probs, labels, dloss])
    np.testing.assert_allclose(dlogits, (probs - np.eye(3)[labels]) * 2.5 / 5, rtol=1e-12)


@pytest.mark.parametrize("bad", [3, -1])
def test_out_of_range_labels_raise(bad):
    logits = rng.standard_normal((4, 3))
    labels = np.array([0, 1, bad, 2])
    with pytest.raises(ValueError, match=rf"label {bad} at position 2 is outside \[0, 3\)"):
        run_op("softmax_cross_entropy", [logits, labels])
    probs = np.full((4, 3), 1 / 3)
    with pytest.raises(ValueError, match="outside"):
        run_op("softmax_cross_entropy_grad", [probs, labels, np.array(1.0)])


def test_probabilities_carry_no_gradient():
    ev = Eager()
    ids = [ev.const(a) for a in xent_inputs(3, 4)]
    outs = ev.apply("softmax_cross_entropy", ids)
    node = SimpleNamespace(op="softmax_cross_entropy", attrs={}, inputs=tuple(ids), outputs=outs)
    with pytest.raises(OpError, match="only output 0"):
        registry.get("softmax_cross_entropy").gradient(ev, node, [None, ev.const(np.ones((3, 4)))], [True, False])


def test_softmax_cross_entropy_shape_errors():
    decl = registry.get("softmax_cross_entropy")
    logits = np.zeros((4, 3))
    with pytest.raises(ShapeError, match=r"labels must have shape \(4,\).*got \(4, 1\)"):
        decl.infer({}, [logits, np.zeros((4, 1), np.int32)])
    with pytest.raises(ShapeError, match=r"labels must have shape \(4,\).*got \(5,\)"):
        decl.infer({}, [logits, np.zeros(5, np.int32)])
    with pytest.raises(ShapeError, match="integer dtype.*float32"):
        decl.infer({}, [logits, np.zeros(4, np.float32)])
    with pytest.raises(ShapeError, match=r"\[N,C\] matrix"):
        decl.infer({}, [np.zeros(4), np.zeros(4, np.int32)])
    with pytest.raises(ShapeError, match="floating"):
        decl.infer({}, [np.zeros((4, 3), np.int32), np.zeros(4, np.int32)])
    grad = registry.get("softmax_cross_entropy_grad")
    with pytest.raises(ShapeError, match="dloss must be a scalar"):
        grad.infer({}, [logits, np.zeros(4, np.int32), np.zeros(1)])
