import numpy as np
import pytest

from ops import registry
from ops.registry import OpError, ShapeError

from .opcheck import check_gradient, run_op

rng = np.random.default_rng(0)

# (N, C, H, W, O, kernel, stride, padding, groups)
CASES = [
    (2, 4, 7, 6, 6, 3, 1, 1, 1),
    (2, 4, 8, 8, 4, 3, 2, 1, 4),            # depthwise
    (1, 6, 5, 5, 4, (1, 3), (2, 1), (0, 1), 2),
    (2, 3, 6, 6, 5, 1, 1, 0, 1),             # pointwise
    (1, 2, 9, 9, 2, (7, 1), 1, (3, 0), 1),   # Inception's 7x1
    (1, 2, 5, 7, 3, 3, 2, 2, 1),
]


def naive_conv(x, w, stride, padding, groups):
    s = (stride, stride) if isinstance(stride, int) else stride
    p = (padding, padding) if isinstance(padding, int) else padding
    n_, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    oh, ow = (h + 2 * p[0] - kh) // s[0] + 1, (wd + 2 * p[1] - kw) // s[1] + 1
    y = np.zeros((n_, o, oh, ow))
    og = o // groups
    for n in range(n_):
        for oc in range(o):
            g = oc // og
            for i in range(oh):
                for j in range(ow):
                    patch = xp[n, g * cg:(g + 1) * cg, i * s[0]:i * s[0] + kh, j * s[1]:j * s[1] + kw]
                    y[n, oc, i, j] = np.sum(patch * w[oc])
    return y


def make(case):
    n, c, h, w, o, k, s, p, g = case
    k2 = (k, k) if isinstance(k, int) else k
    return rng.standard_normal((n, c, h, w)), rng.standard_normal((o, c // g, *k2)), dict(stride=s, padding=p, groups=g)


@pytest.mark.parametrize("case", CASES)
def test_forward_matches_naive_loops(case):
    x, w, attrs = make(case)
    (y,) = run_op("conv2d", [x, w], **attrs)
    np.testing.assert_allclose(y, naive_conv(x, w, **attrs), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_gradients_match_finite_differences(case):
    x, w, attrs = make(case)
    check_gradient("conv2d", [x, w], attrs=attrs, max_points=25)


def test_only_wanted_gradients_are_built():
    x, w, attrs = make(CASES[0])
    grads = check_gradient("conv2d", [x, w], attrs=attrs, wrt=[1], max_points=5)
    assert grads[0] is None and grads[1] is not None


def test_float32_kernels_are_deterministic():
    x, w, attrs = make(CASES[1])
    x, w = x.astype(np.float32), w.astype(np.float32)
    a, b = run_op("conv2d", [x, w], **attrs)[0], run_op("conv2d", [x.copy(), w.copy()], **attrs)[0]
    assert np.array_equal(a, b)


def test_shape_errors_say_what_is_wrong():
    conv = registry.get("conv2d")
    x, w = np.zeros((1, 4, 5, 5)), np.zeros((6, 3, 3, 3))
    with pytest.raises(ShapeError, match="needs 4 input channels per group"):
        conv.infer(conv.canon({}), [x, w])
    with pytest.raises(ShapeError, match="groups=3 must divide"):
        conv.infer(conv.canon({"groups": 3}), [x, np.zeros((6, 1, 3, 3))])
    with pytest.raises(ShapeError, match="does not fit"):
        conv.infer(conv.canon({}), [np.zeros((1, 4, 2, 2)), np.zeros((6, 4, 3, 3))])
    with pytest.raises(OpError, match="stride must be >= 1"):
        conv.canon({"stride": 0})
    with pytest.raises(OpError, match="pair of ints"):
        conv.canon({"padding": (1, 2, 3)})
