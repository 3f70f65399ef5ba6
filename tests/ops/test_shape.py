import numpy as np
import pytest

import ops.shape  # noqa: F401  (registers the operators)
from ops import registry
from ops.registry import OpError, ShapeError

from .opcheck import check_gradient, run_op

rng = np.random.default_rng(0)
BASE = (2, 3, 4)


def pieces(axis, sizes):
    return [rng.standard_normal(BASE[:axis] + (s,) + BASE[axis + 1:]) for s in sizes]


@pytest.mark.parametrize("axis,sizes", [(0, (1, 2)), (1, (2, 1, 3)), (2, (1, 1, 2, 3)), (-1, (2, 2))])
def test_concat_gradient_and_forward(axis, sizes):
    xs = pieces(axis, sizes)
    check_gradient("concat", xs, attrs={"axis": axis})
    (y,) = run_op("concat", xs, axis=axis)
    assert np.array_equal(y, np.concatenate(xs, axis=axis))


def test_concat_gradient_honours_wanted():
    grads = check_gradient("concat", pieces(1, (1, 2, 3)), wrt=[1])
    assert grads[0] is None and grads[2] is None


@pytest.mark.parametrize("axis,sizes", [(0, (1, 3)), (1, (1, 1, 1)), (2, (2, 3, 1, 4)), (-2, (2, 1))])
def test_split_gradient_and_forward(axis, sizes):
    shape = list(BASE)
    shape[axis] = sum(sizes)
    x = rng.standard_normal(shape)
    check_gradient("split", [x], attrs={"axis": axis, "sizes": sizes}, outputs=tuple(range(len(sizes))))
    ys = run_op("split", [x], axis=axis, sizes=sizes)
    expect = np.split(x, np.cumsum(sizes)[:-1], axis=axis)
    assert len(ys) == len(sizes) and all(np.array_equal(a, b) for a, b in zip(ys, expect))


@pytest.mark.parametrize("outputs", [(0,), (1,), (0, 2), (1, 3)])
def test_split_gradient_with_some_outputs_unused(outputs):
    # The unused outputs' slices of the gradient come from zeros.
    x = rng.standard_normal((3, 10, 2))
    check_gradient("split", [x], attrs={"axis": 1, "sizes": (1, 2, 3, 4)}, outputs=outputs)


def test_split_without_any_output_gradient():
    decl = registry.get("split")
    assert decl.gradient(None, None, [None, None], [True]) == [None]


@pytest.mark.parametrize("src,shape", [((2, 3, 4), (6, 4)), ((2, 3, 4), (-1,)), ((6,), (2, -1, 3)), ((4, 5), (5, 4))])
def test_reshape_gradient_and_forward(src, shape):
    x = rng.standard_normal(src)
    check_gradient("reshape", [x], attrs={"shape": shape})
    (y,) = run_op("reshape", [x], shape=shape)
    assert np.array_equal(y, x.reshape(shape))


def test_attributes_from_json_lists():
    assert registry.get("split").canon({"sizes": [2, 3]}) == {"axis": 1, "sizes": (2, 3)}
    # reshape keeps the -1 the user wrote; only the shape rule resolves it.
    reshape = registry.get("reshape")
    attrs = reshape.canon({"shape": [-1, 4]})
    assert attrs == {"shape": (-1, 4)}
    assert reshape.infer(attrs, [np.zeros((2, 3, 4))]) == [((6, 4), np.dtype(np.float64))]


def test_shape_errors():
    concat, split, reshape = (registry.get(n) for n in ("concat", "split", "reshape"))
    with pytest.raises(ShapeError, match=r"input 1 has shape \(2, 3, 5\) but input 0 has \(2, 3, 4\).*except axis 1"):
        concat.infer({"axis": 1}, [np.zeros((2, 3, 4)), np.zeros((2, 3, 5))])
    with pytest.raises(ShapeError, match="except axis 0"):
        concat.infer({"axis": 0}, [np.zeros((2, 3)), np.zeros((2, 3, 1))])
    with pytest.raises(ShapeError, match="axis 3 is out of range"):
        concat.infer({"axis": 3}, [np.zeros((2, 3, 4))])
    with pytest.raises(ShapeError, match="dtypes"):
        concat.infer({"axis": 0}, [np.zeros((2, 3)), np.zeros((2, 3), np.float32)])
    with pytest.raises(ShapeError, match=r"sizes \(2, 3\) sum to 5, but axis 1 of the input \(4, 6\) has 6"):
        split.infer(split.canon({"sizes": (2, 3)}), [np.zeros((4, 6))])
    with pytest.raises(OpError, match="positive ints"):
        split.canon({"sizes": (2, 0)})
    with pytest.raises(OpError, match="must be an int"):
        split.canon({"sizes": (2.5, 3)})
    with pytest.raises(OpError, match="missing"):
        split.canon({"axis": 0})
    with pytest.raises(OpError, match="at most one -1"):
        reshape.canon({"shape": (-1, 2, -1)})
    with pytest.raises(OpError, match="at most one -1"):
        reshape.canon({"shape": (-2, 3)})
    with pytest.raises(ShapeError, match=r"\(24 elements\) to \(5, 4\) \(20 elements\)"):
        reshape.infer({"shape": (5, 4)}, [np.zeros((2, 3, 4))])
    with pytest.raises(ShapeError, match="24 is not a multiple of 5"):
        reshape.infer({"shape": (5, -1)}, [np.zeros((2, 3, 4))])


def test_copies_cost_no_flops():
    x = np.zeros((4, 6), np.float32)
    outs = [np.zeros((4, 2), np.float32), np.zeros((4, 4), np.float32)]
    cost = registry.get("split").cost({"axis": 1, "sizes": (2, 4)}, [x], outs)
    assert cost.flops == 0 and cost.bytes == 2 * x.nbytes
