"""ops/indexing.py: gather and index_select, their shape rules, numpy twins, gradients (float64
finite differences, and torch.autograd's to 1e-12 where torch is installed), and their
gradients' deterministic scatter-adds."""
import numpy as np
import pytest

from ops import registry
from ops.registry import OpError, ShapeError

from .cuda_cases import case, spec
from .opcheck import check_gradient, run_op

rng = np.random.default_rng(0)


def _gather_index(x_shape, index_shape, axis, dtype):
    return rng.integers(0, x_shape[axis], size=index_shape).astype(dtype)


def _scatter_add(shape, index, dy, axis):
    """gather_grad by the definition: a Python loop over dy's positions in order."""
    out = np.zeros(shape, dy.dtype)
    for p in np.ndindex(*index.shape):
        q = list(p)
        q[axis] = index[p]
        out[tuple(q)] += dy[p]
    return out


# ---------------------------------------------------------------------- gather

@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("x_shape,index_shape,axis", [((5, 4, 3), (7, 4, 3), 0), ((5, 4, 3), (2, 6, 3), 1),
                                                      ((5, 9), (4, 12), -1), ((6,), (10,), 0)])
def test_gather_matches_numpy_and_its_gradient_the_finite_differences(x_shape, index_shape, axis, index_dtype):
    x = rng.standard_normal(x_shape)
    index = _gather_index(x_shape, index_shape, axis, index_dtype)
    (y,) = run_op("gather", [x, index], axis=axis)
    assert y.shape == index_shape and y.dtype == x.dtype
    want = np.empty(index_shape)
    for p in np.ndindex(*index_shape):
        q = list(p)
        q[axis % len(x_shape)] = index[p]
        want[p] = x[tuple(q)]
    assert np.array_equal(y, want)
    grads = check_gradient("gather", [x, index], attrs={"axis": axis}, wrt=[0])
    assert grads[1] is None


def test_gather_equals_take_along_axis_where_shapes_agree():
    x = rng.standard_normal((4, 6, 5)).astype(np.float32)
    index = rng.integers(0, 6, size=(4, 9, 5)).astype(np.int64)
    (y,) = run_op("gather", [x, index], axis=1)
    assert np.array_equal(y, np.take_along_axis(x, index, axis=1))


def test_gather_grad_adds_positions_in_order_and_zeroes_the_rest():
    index = np.array([[2, 0], [2, 2], [4, 0]], np.int32)
    dy = rng.standard_normal((3, 2)).astype(np.float32)
    (dx,) = run_op("gather_grad", [index, dy], shape=(6, 3), axis=0)
    assert np.array_equal(dx, _scatter_add((6, 3), index, dy, 0))
    assert not dx[:, 2].any() and not dx[[1, 3, 5]].any()


def test_gather_errors():
    g = registry.get("gather")
    with pytest.raises(ShapeError, match="integer dtype"):
        g.infer({"axis": 0}, [np.zeros((4, 2)), np.zeros((4, 2))])
    with pytest.raises(ShapeError, match=r"index must have x's rank 2"):
        g.infer({"axis": 0}, [np.zeros((4, 2)), np.zeros(3, np.int64)])
    with pytest.raises(ShapeError, match=r"larger than x \(4, 2\) in dimension 1 \(3 > 2\)"):
        g.infer({"axis": 0}, [np.zeros((4, 2)), np.zeros((5, 3), np.int64)])
    with pytest.raises(ShapeError, match="axis 2 is out of range for a tensor of 2 dimensions"):
        g.infer({"axis": 2}, [np.zeros((4, 2)), np.zeros((4, 2), np.int64)])
    with pytest.raises(ShapeError, match="floating-point"):
        g.infer({"axis": 0}, [np.zeros((4, 2), np.int64), np.zeros((4, 2), np.int64)])
    with pytest.raises(OpError, match="missing attributes"):
        g.canon({})
    with pytest.raises(OpError, match="axis must be an int"):
        g.canon({"axis": 1.5})
    with pytest.raises(ValueError, match=r"index 4 at position 3 is outside \[0, 4\), the size of axis 0"):
        run_op("gather", [np.zeros((4, 2)), np.array([[0, 1], [3, 4]])], axis=0)
    with pytest.raises(ValueError, match=r"index -1 at position 0"):
        run_op("gather", [np.zeros((4, 2)), np.array([[-1, 1]])], axis=0)
    gg = registry.get("gather_grad")
    with pytest.raises(ShapeError, match=r"dy must have index's shape \(2, 2\)"):
        gg.infer({"shape": (4, 2), "axis": 0}, [np.zeros((2, 2), np.int32), np.zeros((2, 3))])
    with pytest.raises(OpError, match="missing attributes"):
        gg.canon({"axis": 0})
    c = case("gather", [(4, 2), spec((4, 2), "int16")], axis=0)
    with pytest.raises(OpError, match="int32 and int64 indices"):
        c.decl.cuda_launches(c.attrs, c.ins, c.outs)


# ---------------------------------------------------------------------- index_select

@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("x_shape,n,axis", [((6, 4, 3), 9, 0), ((6, 4, 3), 5, 1), ((6, 7), 3, -1), ((5,), 8, 0)])
def test_index_select_matches_numpy_and_its_gradient_the_finite_differences(x_shape, n, axis, index_dtype):
    x = rng.standard_normal(x_shape)
    index = np.array(list(range(x_shape[axis])) * 3, index_dtype)[:n]
    rng.shuffle(index)
    (y,) = run_op("index_select", [x, index], axis=axis)
    assert np.array_equal(y, np.take(x, index, axis=axis))
    grads = check_gradient("index_select", [x, index], attrs={"axis": axis}, wrt=[0])
    assert grads[1] is None


def test_index_select_grad_adds_positions_in_order():
    index = np.array([2, 0, 2, 2, 4], np.int64)
    dy = rng.standard_normal((3, 5, 2)).astype(np.float32)
    (dx,) = run_op("index_select_grad", [index, dy], shape=(3, 6, 2), axis=1)
    want = np.zeros((3, 6, 2), np.float32)
    for j, k in enumerate(index):
        want[:, k] += dy[:, j]
    assert np.array_equal(dx, want)


def test_index_select_errors():
    s = registry.get("index_select")
    with pytest.raises(ShapeError, match=r"index must be 1-D .* got shape \(2, 2\)"):
        s.infer({"axis": 0}, [np.zeros((4, 2)), np.zeros((2, 2), np.int64)])
    with pytest.raises(ShapeError, match="integer dtype"):
        s.infer({"axis": 0}, [np.zeros((4, 2)), np.zeros(3)])
    with pytest.raises(ShapeError, match="axis -3 is out of range"):
        s.infer({"axis": -3}, [np.zeros((4, 2)), np.zeros(3, np.int32)])
    with pytest.raises(ShapeError, match="scalar"):
        s.infer({"axis": 0}, [np.zeros(()), np.zeros(3, np.int32)])
    with pytest.raises(ValueError, match=r"index 2 at position 1 is outside \[0, 2\), the size of axis 1"):
        run_op("index_select", [np.zeros((4, 2)), np.array([0, 2])], axis=1)
    sg = registry.get("index_select_grad")
    with pytest.raises(ShapeError, match=r"dy must have shape \(3, 2\)"):
        sg.infer({"shape": (4, 2), "axis": 0}, [np.zeros(3, np.int32), np.zeros((4, 2))])
    with pytest.raises(OpError, match="shape must be a tuple of ints"):
        sg.canon({"shape": 3, "axis": 0})


def test_costs_count_an_operation_per_output_and_the_bytes():
    c = case("index_select", [(6, 4), spec((5,), "int64")], axis=0)
    cost = c.decl.cost(c.attrs, c.ins, c.outs)
    assert cost.flops == 20 and cost.bytes == 4 * (24 + 20) + 8 * 5
    assert registry.get("gather").recomputable and registry.get("index_select").recomputable


# ---------------------------------------------------------------------- against PyTorch

def _torch_check(op, x, index, axis, torch_fn):
    torch = pytest.importorskip("torch")
    tx = torch.tensor(x, requires_grad=True)
    ty = torch_fn(tx, axis, torch.tensor(index.astype(np.int64)))
    dy = rng.standard_normal(ty.shape)
    ty.backward(torch.tensor(dy))
    (y,) = run_op(op, [x, index], axis=axis)
    (dx,) = run_op(op + "_grad", [index, dy], shape=x.shape, axis=axis)
    want_y, want_dx = ty.detach().numpy(), tx.grad.numpy()
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(want_dx).max()))


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("x_shape,index_shape,axis", [((5, 4, 3), (7, 4, 3), 0), ((5, 4, 3), (2, 6, 3), 1),
                                                      ((5, 9), (4, 30), -1), ((3, 4, 2, 5), (2, 3, 2, 9), 3)])
def test_gather_equals_torch(x_shape, index_shape, axis, index_dtype):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal(x_shape)
    index = _gather_index(x_shape, index_shape, axis, index_dtype)
    _torch_check("gather", x, index, axis, lambda t, a, i: torch.gather(t, a, i))


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("x_shape,n,axis", [((6, 4, 3), 20, 0), ((6, 4, 3), 9, 1), ((6, 7), 30, -1)])
def test_index_select_equals_torch(x_shape, n, axis, index_dtype):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal(x_shape)
    index = rng.integers(0, x_shape[axis], size=n).astype(index_dtype)
    _torch_check("index_select", x, index, axis, lambda t, a, i: torch.index_select(t, a, i))


def test_gradients_through_a_graph_builder():
    """The forward ops' gradient declarations emit the *_grad ops with x's shape."""
    x = rng.standard_normal((4, 3))
    index = np.array([[0, 3, 3], [3, 3, 1]], np.int64)
    check_gradient("gather", [x, index], attrs={"axis": 0}, wrt=[0])     # checks the gradient's shape too
    check_gradient("index_select", [x, np.array([2, 2, 0, 2])], attrs={"axis": 0}, wrt=[0])
