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


# ---------------------------------------------------------------- log_softmax, nll_loss

@pytest.mark.parametrize("shape", [(1, 5), (4, 3), (2, 3, 7), (6,), (3, 1)])
def test_log_softmax_gradient(shape):
    check_gradient("log_softmax", [rng.standard_normal(shape) * 2])


def test_log_softmax_matches_formula_and_is_stable():
    x = rng.standard_normal((4, 6)) * 3
    (y,) = run_op("log_softmax", [x])
    np.testing.assert_allclose(y, np.log(np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)), rtol=1e-12)
    (y,) = run_op("log_softmax", [np.array([[1000.0, 0.0, -1000.0]], np.float32)])
    assert y.dtype == np.float32 and np.isfinite(y).all()
    np.testing.assert_array_equal(y, [[0, -1000, -2000]])


def test_log_softmax_grad_kernel_matches_formula():
    y, dy = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    (dx,) = run_op("log_softmax_grad", [y, dy])
    np.testing.assert_allclose(dx, dy - np.exp(y) * dy.sum(axis=-1, keepdims=True), rtol=1e-13)


def test_log_softmax_shape_errors():
    with pytest.raises(ShapeError, match="non-empty"):
        registry.get("log_softmax").infer({}, [np.zeros((3, 0))])
    with pytest.raises(ShapeError, match="floating"):
        registry.get("log_softmax").infer({}, [np.zeros((3, 2), np.int32)])
    with pytest.raises(ShapeError, match="must match"):
        registry.get("log_softmax_grad").infer({}, [np.zeros((3, 2)), np.zeros((3, 3))])


def nll_inputs(n, c, label_dtype=np.int64, ignore=None):
    logp = np.log(rng.dirichlet(np.ones(c), n))
    labels = rng.integers(0, c, n).astype(label_dtype)
    if ignore is not None:
        labels[::3] = ignore
    return [logp, labels]


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("ignore_index", [-100, 2])
@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
def test_nll_loss_forward_and_gradient(reduction, ignore_index, label_dtype):
    logp, labels = nll_inputs(7, 4, label_dtype, ignore=ignore_index)
    (loss,) = run_op("nll_loss", [logp, labels], ignore_index=ignore_index, reduction=reduction)
    kept = labels != ignore_index
    total = -logp[np.flatnonzero(kept), labels[kept]].sum()
    assert loss.shape == () and loss == pytest.approx(total / kept.sum() if reduction == "mean" else total,
                                                      rel=1e-14)
    grads = check_gradient("nll_loss", [logp, labels], {"ignore_index": ignore_index, "reduction": reduction})
    assert grads[1] is None


def test_nll_loss_grad_kernel_matches_formula():
    labels = np.array([2, -100, 0, 2])
    (d,) = run_op("nll_loss_grad", [labels, np.array(1.5)], classes=3)
    expect = np.zeros((4, 3))
    expect[[0, 2, 3], [2, 0, 2]] = -1.5 / 3
    np.testing.assert_array_equal(d, expect)
    (d,) = run_op("nll_loss_grad", [labels.astype(np.int32), np.array(1.5, np.float32)], classes=3,
                  reduction="sum")
    assert d.dtype == np.float32 and d.shape == (4, 3)
    np.testing.assert_array_equal(d, np.where(expect, np.float32(-1.5), np.float32(0)))


def test_nll_loss_with_every_row_ignored_is_nan_and_its_gradient_zero():
    """As PyTorch: mean over no rows is 0/0; no row takes gradient."""
    labels = np.array([-100, -100])
    loss = np.empty((), np.float64)
    registry.get("nll_loss").compute({"ignore_index": -100, "reduction": "mean"}, [np.zeros((2, 3)), labels],
                                     [loss])
    assert np.isnan(loss)
    (d,) = run_op("nll_loss_grad", [labels, np.array(1.0)], classes=3)
    np.testing.assert_array_equal(d, np.zeros((2, 3)))


@pytest.mark.parametrize("bad", [3, -1, -100])
def test_nll_loss_out_of_range_labels_raise(bad):
    logp, labels = nll_inputs(4, 3)
    labels[2] = bad
    with pytest.raises(ValueError, match=rf"label {bad} at position 2 is outside \[0, 3\).*ignore_index 7"):
        run_op("nll_loss", [logp, labels], ignore_index=7)
    with pytest.raises(ValueError, match="outside"):
        run_op("nll_loss_grad", [labels, np.array(1.0)], classes=3, ignore_index=7)


def test_nll_loss_attributes_and_shapes():
    decl, grad = registry.get("nll_loss"), registry.get("nll_loss_grad")
    assert decl.canon({}) == {"ignore_index": -100, "reduction": "mean"}
    with pytest.raises(OpError, match="reduction must be one of"):
        decl.canon({"reduction": "none"})
    with pytest.raises(OpError, match="ignore_index must be an int"):
        decl.canon({"ignore_index": 1.5})
    with pytest.raises(OpError, match="missing attributes"):
        grad.canon({})
    with pytest.raises(OpError, match="classes must be a positive int"):
        grad.canon({"classes": 0})
    with pytest.raises(ShapeError, match=r"labels must have shape \(4,\)"):
        decl.infer(decl.canon({}), [np.zeros((4, 3)), np.zeros(5, np.int64)])
    with pytest.raises(ShapeError, match="integer dtype"):
        grad.infer(grad.canon({"classes": 3}), [np.zeros(4), np.zeros(())])
    with pytest.raises(ShapeError, match="dloss must be a scalar"):
        grad.infer(grad.canon({"classes": 3}), [np.zeros(4, np.int64), np.zeros(1)])
    assert grad.infer(grad.canon({"classes": 3}), [np.zeros(4, np.int32), np.zeros((), np.float32)]) == \
        [((4, 3), np.dtype(np.float32))]


def test_log_softmax_then_nll_loss_is_softmax_cross_entropy():
    logits, labels = xent_inputs(5, 4)
    (logp,) = run_op("log_softmax", [logits])
    (loss,) = run_op("nll_loss", [logp, labels])
    (xent, _) = run_op("softmax_cross_entropy", [logits, labels])
    assert loss == pytest.approx(xent, rel=1e-14)
