import numpy as np
import pytest

import ops.dense  # noqa: F401  (registers the operators)
from ops import registry
from ops.registry import OpError, ShapeError

from .opcheck import check_gradient, run_op

rng = np.random.default_rng(0)
SIZES = [(1, 1, 1), (3, 4, 5), (5, 2, 7), (2, 6, 1)]   # (N, K, M)


def fc_inputs(n, k, m, bias, dtype=np.float64):
    arrays = [rng.standard_normal((n, k)), rng.standard_normal((m, k))]
    if bias:
        arrays.append(rng.standard_normal(m))
    return [a.astype(dtype) for a in arrays]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("n,k,m", SIZES)
def test_fully_connected_gradient(n, k, m, bias):
    check_gradient("fully_connected", fc_inputs(n, k, m, bias))


@pytest.mark.parametrize("wrt", [[0], [1], [2], [0, 2]])
def test_fully_connected_gradient_honours_wanted(wrt):
    grads = check_gradient("fully_connected", fc_inputs(3, 4, 2, True), wrt=wrt)
    assert [i for i, gr in enumerate(grads) if gr is not None] == wrt


@pytest.mark.parametrize("bias", [False, True])
def test_fully_connected_forward_matches_formula(bias):
    ins = fc_inputs(6, 5, 4, bias, np.float32)
    (y,) = run_op("fully_connected", ins)
    expect = ins[0] @ ins[1].T + (ins[2] if bias else 0)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, expect, rtol=1e-6, atol=1e-6)


def test_gradient_kernels_match_formula():
    x, w = fc_inputs(5, 3, 4, False)
    dy = rng.standard_normal((5, 4))
    (dx,) = run_op("fully_connected_grad_data", [w, dy])
    np.testing.assert_allclose(dx, dy @ w, rtol=1e-12)
    dw, db = run_op("fully_connected_grad_weight", [x, dy], has_bias=True)
    np.testing.assert_allclose(dw, dy.T @ x, rtol=1e-12)
    np.testing.assert_allclose(db, dy.sum(axis=0), rtol=1e-12)
    assert len(run_op("fully_connected_grad_weight", [x, dy])) == 1


def test_fully_connected_cost():
    decl = registry.get("fully_connected")
    ins = fc_inputs(8, 16, 4, True, np.float32)
    outs = [np.zeros((8, 4), np.float32)]
    cost = decl.cost({}, ins, outs)
    assert cost.flops == 2 * 8 * 16 * 4 + 8 * 4
    assert cost.bytes == 4 * (8 * 16 + 4 * 16 + 4 + 8 * 4)


def test_fully_connected_errors():
    decl = registry.get("fully_connected")
    with pytest.raises(ShapeError, match=r"w must be \[M, 4\] to match x's K=4"):
        decl.infer({}, [np.zeros((3, 4)), np.zeros((5, 6))])
    with pytest.raises(ShapeError, match=r"b must have shape \(5,\)"):
        decl.infer({}, [np.zeros((3, 4)), np.zeros((5, 4)), np.zeros(4)])
    with pytest.raises(ShapeError, match="x must be 2-D"):
        decl.infer({}, [np.zeros((3, 4, 1)), np.zeros((5, 4))])
    with pytest.raises(OpError, match=r"\(x, w\) or \(x, w, b\), got 1"):
        decl.infer({}, [np.zeros((3, 4))])
    with pytest.raises(OpError, match="got 4"):
        decl.infer({}, [np.zeros((3, 4)), np.zeros((5, 4)), np.zeros(5), np.zeros(5)])
    with pytest.raises(ShapeError, match="dtypes"):
        decl.infer({}, [np.zeros((3, 4), np.float32), np.zeros((5, 4))])
    with pytest.raises(ShapeError, match="floating"):
        decl.infer({}, [np.zeros((3, 4), np.int32), np.zeros((5, 4), np.int32)])
    with pytest.raises(ShapeError, match="same N"):
        registry.get("fully_connected_grad_weight").infer({"has_bias": False}, [np.zeros((3, 4)), np.zeros((2, 5))])
    with pytest.raises(OpError, match="has_bias must be a bool"):
        registry.get("fully_connected_grad_weight").canon({"has_bias": "yes"})
