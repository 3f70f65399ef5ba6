import numpy as np
import pytest

from ops import registry
from ops.registry import ShapeError

from .opcheck import check_gradient, run_op

rng = np.random.default_rng(0)
SHAPES = [(7,), (3, 5), (2, 3, 4, 5)]


@pytest.mark.parametrize("op", ["relu", "sigmoid", "tanh"])
@pytest.mark.parametrize("shape", SHAPES)
def test_unary_gradients(op, shape):
    check_gradient(op, [rng.standard_normal(shape)])


@pytest.mark.parametrize("op", ["add", "mul"])
@pytest.mark.parametrize("shape", SHAPES)
def test_binary_gradients(op, shape):
    check_gradient(op, [rng.standard_normal(shape), rng.standard_normal(shape)])


@pytest.mark.parametrize("n", [1, 2, 5])
def test_sum_n_gradient_and_order(n):
    xs = [rng.standard_normal((4, 3)) for _ in range(n)]
    check_gradient("sum_n", xs)
    (y,) = run_op("sum_n", xs)
    expect = xs[0].copy()
    for x in xs[1:]:
        expect = expect + x
    assert np.array_equal(y, expect)


def test_accumulate_adds_into_its_first_operand_which_it_may_overwrite():
    from ops import registry
    op = registry.get("accumulate")
    assert op.inplace == {0: 0} and not op.state_outputs and not op.differentiable
    acc, c = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    (y,) = run_op("accumulate", [acc, c])
    assert np.array_equal(y, acc + c)
    op.compute({}, [acc, c], [acc])                   # in place, as the planner may place it
    assert np.array_equal(acc, y)


def test_scale_gradient():
    check_gradient("scale", [rng.standard_normal((3, 4))], attrs={"factor": 0.25})


def test_kernels_match_numpy():
    x = rng.standard_normal((5, 6))
    assert np.array_equal(run_op("relu", [x])[0], np.maximum(x, 0))
    np.testing.assert_allclose(run_op("sigmoid", [x])[0], 1 / (1 + np.exp(-x)), rtol=1e-12)
    assert np.array_equal(run_op("tanh", [x])[0], np.tanh(x))
    assert run_op("sigmoid", [np.array([-1000.0, 1000.0])])[0].tolist() == pytest.approx([0.0, 1.0])


def test_fill():
    (y,) = run_op("fill", [], shape=(2, 3), dtype="float64", value=1.5)
    assert y.dtype == np.float64 and (y == 1.5).all()


def test_shape_errors():
    with pytest.raises(ShapeError, match="one shape"):
        registry.get("add").infer({}, [np.zeros((2, 3)), np.zeros((3, 2))])
    with pytest.raises(ShapeError, match="dtypes"):
        registry.get("mul").infer({}, [np.zeros(3, np.float32), np.zeros(3, np.float64)])
    with pytest.raises(ShapeError, match="floating"):
        registry.get("relu").infer({}, [np.zeros(3, np.int32)])
