import numpy as np
import pytest

from ops import registry
from ops.registry import OpError, ShapeError

from .opcheck import check_gradient, run_op

rng = np.random.default_rng(1)

POOLS = [
    ("max_pool2d", dict(kernel=3, stride=2, padding=1)),
    ("max_pool2d", dict(kernel=2)),
    ("max_pool2d", dict(kernel=(3, 1), stride=1)),
    ("avg_pool2d", dict(kernel=3, stride=2, padding=1)),
    ("avg_pool2d", dict(kernel=3, stride=1, padding=1, count_include_pad=False)),
    ("avg_pool2d", dict(kernel=2)),
    ("global_avg_pool", {}),
]


@pytest.mark.parametrize("op,attrs", POOLS)
@pytest.mark.parametrize("shape", [(2, 3, 7, 7), (1, 2, 6, 5)])
def test_gradients(op, attrs, shape):
    check_gradient(op, [rng.standard_normal(shape)], attrs=attrs, max_points=30)


def naive_pool(x, k, s, p, reduce, include_pad=True):
    n, c, h, w = x.shape
    fill = -np.inf if reduce == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    valid = np.pad(np.ones((h, w)), p)
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * s:i * s + k, j * s:j * s + k]
            if reduce == "max":
                y[:, :, i, j] = win.max(axis=(2, 3))
            else:
                count = k * k if include_pad else valid[i * s:i * s + k, j * s:j * s + k].sum()
                y[:, :, i, j] = win.sum(axis=(2, 3)) / count
    return y


def test_forward_against_loops():
    x = rng.standard_normal((2, 3, 7, 7))
    np.testing.assert_allclose(run_op("max_pool2d", [x], kernel=3, stride=2, padding=1)[0],
                               naive_pool(x, 3, 2, 1, "max"))
    np.testing.assert_allclose(run_op("avg_pool2d", [x], kernel=3, stride=2, padding=1)[0],
                               naive_pool(x, 3, 2, 1, "avg"))
    np.testing.assert_allclose(run_op("avg_pool2d", [x], kernel=3, stride=1, padding=1, count_include_pad=False)[0],
                               naive_pool(x, 3, 1, 1, "avg", include_pad=False))
    np.testing.assert_allclose(run_op("global_avg_pool", [x])[0], x.mean(axis=(2, 3)))


def test_max_pool_gradient_goes_to_the_first_maximum():
    x = np.zeros((1, 1, 2, 2))          # a tie: all four equal
    dy = np.ones((1, 1, 1, 1))
    (dx,) = run_op("max_pool2d_grad", [x, dy], kernel=2)
    assert dx.ravel().tolist() == [1.0, 0.0, 0.0, 0.0]


def test_errors():
    mp = registry.get("max_pool2d")
    with pytest.raises(ShapeError, match="does not fit"):
        mp.infer(mp.canon({"kernel": 5}), [np.zeros((1, 1, 3, 3))])
    with pytest.raises(ShapeError, match=r"needs x \[N,C,H,W\]"):
        mp.infer(mp.canon({"kernel": 2}), [np.zeros((3, 3))])
    with pytest.raises(OpError, match="at most half the kernel"):
        mp.canon({"kernel": 2, "padding": 2})
    with pytest.raises(OpError, match="missing attributes"):
        mp.canon({})
