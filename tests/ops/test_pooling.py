import numpy as np
import pytest

import ops.pooling  # noqa: F401  (registers the operators)
from ops import registry
from ops.registry import OpError, ShapeError

from .opcheck import check_gradient, run_op

rng = np.random.default_rng(1)

POOLS = [
    ("max_pool2d", dict(kernel=3, stride=2, padding=1)),
    ("max_pool2d", dict(kernel=2)),
    ("max_pool2d", dict(kernel=(3, 1), stride=1)),
    ("max_pool2d", dict(kernel=(2, 3), stride=(1, 2), padding=(1, 0))),
    ("avg_pool2d", dict(kernel=3, stride=2, padding=1)),
    ("avg_pool2d", dict(kernel=3, stride=1, padding=1, count_include_pad=False)),
    ("avg_pool2d", dict(kernel=2)),
    ("avg_pool2d", dict(kernel=(3, 2), stride=(2, 1), padding=(1, 1), count_include_pad=False)),
    ("global_avg_pool", {}),
]


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


@pytest.mark.parametrize("op,attrs", POOLS)
@pytest.mark.parametrize("shape", [(2, 3, 7, 7), (1, 2, 6, 5)])
def test_gradients(op, attrs, shape):
    check_gradient(op, [rng.standard_normal(shape)], attrs=attrs, max_points=30)


def naive_pool(x, kernel, stride=None, padding=0, reduce="max", include_pad=True):
    (kh, kw), (ph, pw) = pair(kernel), pair(padding)
    sh, sw = pair(stride if stride is not None else kernel)
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=-np.inf if reduce == "max" else 0.0)
    valid = np.pad(np.ones((h, w)), ((ph, ph), (pw, pw)))
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw]
            if reduce == "max":
                y[:, :, i, j] = win.max(axis=(2, 3))
            else:
                count = kh * kw if include_pad else valid[i * sh:i * sh + kh, j * sw:j * sw + kw].sum()
                y[:, :, i, j] = win.sum(axis=(2, 3)) / count
    return y


def naive_max_pool_grad(x, dy, kernel, stride=None, padding=0):
    """Each window's dy goes to its first maximum in row-major order (np.argmax's choice)."""
    (kh, kw), (ph, pw) = pair(kernel), pair(padding)
    sh, sw = pair(stride if stride is not None else kernel)
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=-np.inf)
    dxp = np.zeros_like(xp)
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            for i in range(dy.shape[2]):
                for j in range(dy.shape[3]):
                    k = np.argmax(xp[n, c, i * sh:i * sh + kh, j * sw:j * sw + kw])
                    dxp[n, c, i * sh + k // kw, j * sw + k % kw] += dy[n, c, i, j]
    return dxp[:, :, ph:ph + x.shape[2], pw:pw + x.shape[3]]


@pytest.mark.parametrize("op,attrs", [p for p in POOLS if p[0] != "global_avg_pool"])
def test_forward_against_loops(op, attrs):
    x = rng.standard_normal((2, 3, 7, 6))
    (y,) = run_op(op, [x], **attrs)
    geometry = {k: v for k, v in attrs.items() if k != "count_include_pad"}
    expect = naive_pool(x, **geometry, reduce=op[:3], include_pad=attrs.get("count_include_pad", True))
    np.testing.assert_allclose(y, expect, rtol=1e-12)


def test_global_avg_pool_forward():
    x = rng.standard_normal((2, 3, 5, 4))
    np.testing.assert_allclose(run_op("global_avg_pool", [x])[0], x.mean(axis=(2, 3)), rtol=1e-12)
    (dx,) = run_op("global_avg_pool_grad", [np.ones((2, 3))], input_hw=(5, 4))
    assert dx.shape == x.shape and np.all(dx == 1 / 20)


@pytest.mark.parametrize("attrs", [dict(kernel=3, stride=1, padding=1), dict(kernel=3, stride=2),
                                   dict(kernel=(2, 3), stride=(1, 2), padding=(1, 0))])
def test_max_pool_gradient_goes_to_the_first_maximum_with_ties(attrs):
    # Few distinct values: many ties inside windows, and overlapping windows sharing a maximum.
    x = rng.integers(0, 3, (2, 2, 6, 7)).astype(np.float64)
    (y,) = run_op("max_pool2d", [x], **attrs)
    dy = rng.standard_normal(y.shape)
    (dx,) = run_op("max_pool2d_grad", [x, y, dy], **attrs)
    np.testing.assert_allclose(dx, naive_max_pool_grad(x, dy, **attrs), rtol=1e-12, atol=1e-15)


def test_max_pool_tie_in_one_window():
    x = np.zeros((1, 1, 2, 2))
    (dx,) = run_op("max_pool2d_grad", [x, np.zeros((1, 1, 1, 1)), np.ones((1, 1, 1, 1))], kernel=2)
    assert dx.ravel().tolist() == [1.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("op,attrs", POOLS)
def test_float32_stays_float32_and_is_deterministic(op, attrs):
    x = rng.standard_normal((2, 3, 7, 7)).astype(np.float32)
    (y,) = run_op(op, [x], **attrs)
    assert y.dtype == np.float32 and np.array_equal(y, run_op(op, [x.copy()], **attrs)[0])
    dy = rng.standard_normal(y.shape).astype(np.float32)
    if op == "max_pool2d":
        grad, ins, extra = "max_pool2d_grad", [x, y, dy], {}
    else:
        grad, ins, extra = f"{op}_grad", [dy], {"input_hw": (7, 7)}
    (dx,) = run_op(grad, ins, **attrs, **extra)
    assert dx.dtype == np.float32 and np.array_equal(dx, run_op(grad, [t.copy() for t in ins], **attrs, **extra)[0])


def test_costs():
    x, y = np.zeros((2, 3, 8, 8)), np.zeros((2, 3, 4, 4))
    for op in ("max_pool2d", "avg_pool2d"):
        decl = registry.get(op)
        cost = decl.cost(decl.canon({"kernel": 3, "stride": 2, "padding": 1}), [x], [y])
        assert cost.flops == y.size * 9 and cost.bytes == x.nbytes + y.nbytes
    gap = registry.get("global_avg_pool")
    assert gap.cost({}, [x], [np.zeros((2, 3))]).flops == x.size


def test_errors():
    mp = registry.get("max_pool2d")
    assert mp.canon({"kernel": (3, 2)}) == {"kernel": (3, 2), "stride": (3, 2), "padding": (0, 0)}
    with pytest.raises(ShapeError, match="does not fit input 3x3 .* at least 5x5"):
        mp.infer(mp.canon({"kernel": 5}), [np.zeros((1, 1, 3, 3))])
    with pytest.raises(ShapeError, match=r"needs x \[N,C,H,W\], got shape \(3, 3\)"):
        mp.infer(mp.canon({"kernel": 2}), [np.zeros((3, 3))])
    with pytest.raises(ShapeError, match="floating"):
        mp.infer(mp.canon({"kernel": 2}), [np.zeros((1, 1, 4, 4), np.int64)])
    with pytest.raises(OpError, match="at most half the kernel"):
        mp.canon({"kernel": 2, "padding": 2})
    with pytest.raises(OpError, match="missing attributes"):
        mp.canon({})
    with pytest.raises(OpError, match="unknown attributes"):
        mp.canon({"kernel": 2, "count_include_pad": False})

    mg = registry.get("max_pool2d_grad")
    x = np.zeros((1, 2, 6, 6))
    with pytest.raises(ShapeError, match=r"dy \(1, 2, 2, 2\) does not match .* expected \(1, 2, 3, 3\)"):
        mg.infer(mg.canon({"kernel": 2}), [x, np.zeros((1, 2, 3, 3)), np.zeros((1, 2, 2, 2))])
    with pytest.raises(ShapeError, match="same shape"):
        mg.infer(mg.canon({"kernel": 2}), [x, np.zeros((1, 2, 2, 2)), np.zeros((1, 2, 3, 3))])
    ag = registry.get("avg_pool2d_grad")
    with pytest.raises(ShapeError, match=r"expected \(1, 2, 3, 3\)"):
        ag.infer(ag.canon({"kernel": 2, "input_hw": (6, 6)}), [np.zeros((1, 2, 2, 2))])
    gg = registry.get("global_avg_pool_grad")
    with pytest.raises(ShapeError, match=r"needs dy \[N,C\]"):
        gg.infer(gg.canon({"input_hw": 4}), [np.zeros((1, 2, 1, 1))])
