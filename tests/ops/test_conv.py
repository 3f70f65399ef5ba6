import numpy as np
import pytest

import ops.conv  # noqa: F401  (registers the operators)
from ops import registry
from ops.registry import OpError, ShapeError

from .opcheck import check_gradient, run_op

rng = np.random.default_rng(0)

# (N, C, H, W, O, kernel, stride, padding, groups)
CASES = [
    (2, 4, 7, 6, 6, 3, 1, 1, 1),
    (2, 4, 8, 8, 4, 3, 2, 1, 4),             # depthwise, stride 2
    (1, 6, 5, 5, 4, (1, 3), (2, 1), (0, 1), 2),
    (2, 3, 6, 6, 5, 1, 1, 0, 1),             # pointwise
    (1, 2, 9, 9, 2, (7, 1), 1, (3, 0), 1),   # Inception's 7x1...
    (1, 4, 6, 9, 4, (1, 7), 1, (0, 3), 2),   # ...and 1x7, grouped
    (1, 2, 5, 7, 3, 3, 2, 2, 1),             # padding 2
    (2, 3, 6, 5, 3, 3, (1, 2), (2, 0), 3),   # depthwise, asymmetric stride and padding
]


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def naive_conv(x, w, stride, padding, groups):
    (sh, sw), (ph, pw) = pair(stride), pair(padding)
    n_, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh, ow = (h + 2 * ph - kh) // sh + 1, (wd + 2 * pw - kw) // sw + 1
    y = np.zeros((n_, o, oh, ow))
    og = o // groups
    for n in range(n_):
        for oc in range(o):
            g = oc // og
            for i in range(oh):
                for j in range(ow):
                    patch = xp[n, g * cg:(g + 1) * cg, i * sh:i * sh + kh, j * sw:j * sw + kw]
                    y[n, oc, i, j] = np.sum(patch * w[oc])
    return y


def make(case):
    n, c, h, w, o, k, s, p, g = case
    return rng.standard_normal((n, c, h, w)), rng.standard_normal((o, c // g, *pair(k))), \
        dict(stride=s, padding=p, groups=g)


@pytest.mark.parametrize("case", CASES)
def test_forward_matches_naive_loops(case):
    x, w, attrs = make(case)
    (y,) = run_op("conv2d", [x, w], **attrs)      # run_op checks y has infer's shape, fully written
    np.testing.assert_allclose(y, naive_conv(x, w, **attrs), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_gradients_match_finite_differences(case):
    x, w, attrs = make(case)
    check_gradient("conv2d", [x, w], attrs=attrs, max_points=25)


@pytest.mark.parametrize("case", CASES)
def test_gradient_kernels_are_exact_adjoints(case):
    """<conv(x, w), dy> = <x, grad_data(w, dy)> = <w, grad_weight(x, dy)>, over every element."""
    x, w, attrs = make(case)
    (y,) = run_op("conv2d", [x, w], **attrs)
    dy = rng.standard_normal(y.shape)
    (dx,) = run_op("conv2d_grad_data", [w, dy], input_hw=x.shape[2:], **attrs)
    (dw,) = run_op("conv2d_grad_weight", [x, dy], kernel_hw=w.shape[2:], **attrs)
    inner = np.sum(y * dy)
    assert np.sum(x * dx) == pytest.approx(inner, rel=1e-10)
    assert np.sum(w * dw) == pytest.approx(inner, rel=1e-10)


def test_only_wanted_gradients_are_built():
    x, w, attrs = make(CASES[0])
    grads = check_gradient("conv2d", [x, w], attrs=attrs, wrt=[1], max_points=5)
    assert grads[0] is None and grads[1] is not None
    grads = check_gradient("conv2d", [x, w], attrs=attrs, wrt=[0], max_points=5)
    assert grads[0] is not None and grads[1] is None


def test_float32_is_float32_and_deterministic():
    x, w, attrs = make(CASES[1])
    x, w = x.astype(np.float32), w.astype(np.float32)
    (y,) = run_op("conv2d", [x, w], **attrs)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, naive_conv(x, w, **attrs), rtol=1e-4, atol=1e-5)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    for op, ins, hw in [("conv2d", [x, w], {}), ("conv2d_grad_data", [w, dy], {"input_hw": x.shape[2:]}),
                        ("conv2d_grad_weight", [x, dy], {"kernel_hw": w.shape[2:]})]:
        a, b = run_op(op, ins, **attrs, **hw)[0], run_op(op, [t.copy() for t in ins], **attrs, **hw)[0]
        assert a.dtype == np.float32 and np.array_equal(a, b), op


def test_cost_counts_grouped_multiply_adds():
    conv = registry.get("conv2d")
    attrs = conv.canon({"stride": 2, "padding": 1, "groups": 4})
    x, w = np.zeros((2, 8, 9, 9)), np.zeros((12, 2, 3, 3))
    (shape, dtype), = conv.infer(attrs, [x, w])
    assert shape == (2, 12, 5, 5)
    y = np.zeros(shape)
    flops = 2 * 2 * 12 * 5 * 5 * 2 * 3 * 3
    assert conv.cost(attrs, [x, w], [y]).flops == flops
    assert conv.cost(attrs, [x, w], [y]).bytes == x.nbytes + w.nbytes + y.nbytes
    gd, gw = registry.get("conv2d_grad_data"), registry.get("conv2d_grad_weight")
    assert gd.cost(gd.canon({**attrs, "input_hw": (9, 9)}), [w, y], [x]).flops == flops
    assert gw.cost(gw.canon({**attrs, "kernel_hw": (3, 3)}), [x, y], [w]).flops == flops


def test_shape_errors_say_what_is_wrong():
    conv = registry.get("conv2d")
    x = np.zeros((1, 4, 5, 5))
    with pytest.raises(ShapeError, match=r"needs 4 input channels per group .* shape \(6, 4, 3, 3\)"):
        conv.infer(conv.canon({}), [x, np.zeros((6, 3, 3, 3))])
    with pytest.raises(ShapeError, match=r"groups=3 must divide the input channels \(4\)"):
        conv.infer(conv.canon({"groups": 3}), [x, np.zeros((6, 1, 3, 3))])
    with pytest.raises(ShapeError, match=r"groups=2 must divide .* output channels \(5\)"):
        conv.infer(conv.canon({"groups": 2}), [x, np.zeros((5, 2, 3, 3))])
    with pytest.raises(ShapeError, match="does not fit input 2x2 .* at least 3x3"):
        conv.infer(conv.canon({}), [np.zeros((1, 4, 2, 2)), np.zeros((6, 4, 3, 3))])
    with pytest.raises(ShapeError, match=r"x \[N,C,H,W\] must be 4-D"):
        conv.infer(conv.canon({}), [np.zeros((4, 5, 5)), np.zeros((6, 4, 3, 3))])
    with pytest.raises(ShapeError, match="dtypes"):
        conv.infer(conv.canon({}), [x.astype(np.float32), np.zeros((6, 4, 3, 3))])
    with pytest.raises(ShapeError, match="floating"):
        conv.infer(conv.canon({}), [x.astype(np.int32), np.zeros((6, 4, 3, 3), np.int32)])

    gd, gw = registry.get("conv2d_grad_data"), registry.get("conv2d_grad_weight")
    with pytest.raises(ShapeError, match=r"dy \(1, 6, 4, 4\) does not match .* expected \(1, 6, 3, 3\)"):
        gd.infer(gd.canon({"input_hw": (5, 5)}), [np.zeros((6, 4, 3, 3)), np.zeros((1, 6, 4, 4))])
    with pytest.raises(ShapeError, match=r"expected \(1, 6, 3, 3\)"):
        gw.infer(gw.canon({"kernel_hw": 3}), [x, np.zeros((1, 6, 5, 5))])


def test_attribute_errors():
    conv = registry.get("conv2d")
    assert conv.canon({"stride": 2, "padding": (1, 0)}) == {"stride": (2, 2), "padding": (1, 0), "groups": 1}
    with pytest.raises(OpError, match="stride must be >= 1"):
        conv.canon({"stride": 0})
    with pytest.raises(OpError, match="pair of ints"):
        conv.canon({"padding": (1, 2, 3)})
    with pytest.raises(OpError, match="unknown attributes"):
        conv.canon({"bias": True})
    with pytest.raises(OpError, match="missing attributes"):
        registry.get("conv2d_grad_data").canon({})
    with pytest.raises(OpError, match="kernel_hw must be positive"):
        registry.get("conv2d_grad_weight").canon({"kernel_hw": (0, 3)})


# Dilated (DeepLab's atrous) convolutions: (N, C, H, W, O, kernel, stride, padding, groups, dilation)
DILATED = [
    (2, 4, 9, 8, 6, 3, 1, 2, 2, 2),
    (1, 3, 11, 9, 4, 3, (1, 2), (3, 1), 1, (3, 1)),      # dilated along the axis of stride 1 only
    (1, 2, 9, 9, 2, 3, 2, 2, 1, 2),                      # dilated and strided: the direct data gradient
]


def naive_dilated(x, w, stride, padding, groups, dilation):
    """A dilated kernel is the undilated one with zeros between its taps."""
    (dh, dw), (_, _, kh, kw) = pair(dilation), w.shape
    wide = np.zeros((*w.shape[:2], dh * (kh - 1) + 1, dw * (kw - 1) + 1))
    wide[:, :, ::dh, ::dw] = w
    return naive_conv(x, wide, stride, padding, groups)


def make_dilated(case):
    *plain, d = case
    x, w, attrs = make(plain)
    return x, w, {**attrs, "dilation": d}


@pytest.mark.parametrize("case", DILATED)
def test_dilated_forward_matches_a_kernel_with_zeros_between_taps(case):
    x, w, attrs = make_dilated(case)
    (y,) = run_op("conv2d", [x, w], **attrs)
    np.testing.assert_allclose(y, naive_dilated(x, w, **attrs), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", DILATED)
def test_dilated_gradients_match_finite_differences_and_are_adjoints(case):
    x, w, attrs = make_dilated(case)
    check_gradient("conv2d", [x, w], attrs=attrs, max_points=25)
    (y,) = run_op("conv2d", [x, w], **attrs)
    dy = rng.standard_normal(y.shape)
    (dx,) = run_op("conv2d_grad_data", [w, dy], input_hw=x.shape[2:], **attrs)
    (dw,) = run_op("conv2d_grad_weight", [x, dy], kernel_hw=w.shape[2:], **attrs)
    assert np.sum(x * dx) == pytest.approx(np.sum(y * dy), rel=1e-10)
    assert np.sum(w * dw) == pytest.approx(np.sum(y * dy), rel=1e-10)


def test_dilation_one_leaves_the_attributes_as_they_were():
    """Graphs, plans and program digests made before dilation existed must not change."""
    conv = registry.get("conv2d")
    assert conv.canon({"dilation": 1}) == conv.canon({}) == {"stride": (1, 1), "padding": (0, 0), "groups": 1}
    assert conv.canon({"dilation": (2, 1)})["dilation"] == (2, 1)
    with pytest.raises(OpError, match="dilation >= 1"):
        conv.canon({"dilation": 0})
    with pytest.raises(ShapeError, match="kernel 5x5 does not fit input 4x4"):
        conv.infer(conv.canon({"dilation": 2}), [np.zeros((1, 2, 4, 4)), np.zeros((2, 2, 3, 3))])


# Transposed convolutions: (N, Cin, H, W, Cout, kernel, stride, padding, output_padding, groups, dilation)
TRANSPOSED = [
    (2, 6, 4, 5, 4, 3, 2, 1, 1, 1, 1),                   # Pix2PixHD's upsampling layer
    (1, 4, 3, 4, 6, (2, 3), (2, 3), (0, 1), (1, 2), 2, 1),
    (2, 3, 4, 3, 2, 3, 1, 1, 0, 1, 2),                   # dilated
]


def naive_transposed(x, w, stride, padding, output_padding, groups, dilation):
    """Each input pixel scatters w times its value into the output, then the padding is cut."""
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = map(pair, (stride, padding, output_padding, dilation))
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    full = np.zeros((n, cog * groups, (h - 1) * sh + dh * (kh - 1) + 1 + oph, (wd - 1) * sw + dw * (kw - 1) + 1 + opw))
    cig = cin // groups
    for c in range(cin):
        g = c // cig
        for i in range(h):
            for j in range(wd):
                for r in range(kh):
                    for s in range(kw):
                        tap = x[:, c, i, j, None] * w[c, :, r, s]
                        full[:, g * cog:(g + 1) * cog, i * sh + r * dh, j * sw + s * dw] += tap
    return full[:, :, ph:full.shape[2] - ph, pw:full.shape[3] - pw]


def make_transposed(case):
    n, cin, h, w, cout, k, s, p, op, g, d = case
    return rng.standard_normal((n, cin, h, w)), rng.standard_normal((cin, cout // g, *pair(k))), \
        dict(stride=s, padding=p, output_padding=op, groups=g, dilation=d)


@pytest.mark.parametrize("case", TRANSPOSED)
def test_transposed_forward_matches_scattered_taps(case):
    x, w, attrs = make_transposed(case)
    (y,) = run_op("conv_transpose2d", [x, w], **attrs)
    np.testing.assert_allclose(y, naive_transposed(x, w, **attrs), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", TRANSPOSED)
def test_transposed_gradients_match_finite_differences(case):
    x, w, attrs = make_transposed(case)
    check_gradient("conv_transpose2d", [x, w], attrs=attrs, max_points=25)


def test_transposed_is_the_convolution_s_data_gradient():
    """The same kernel: conv_transpose2d(x, w) == conv2d_grad_data(w, x) bit for bit, in float32."""
    x, w, attrs = make_transposed(TRANSPOSED[0])
    x, w = x.astype(np.float32), w.astype(np.float32)
    (y,) = run_op("conv_transpose2d", [x, w], **attrs)
    attrs.pop("output_padding")
    (dx,) = run_op("conv2d_grad_data", [w, x], input_hw=y.shape[2:], **attrs)
    assert y.dtype == np.float32 and np.array_equal(y, dx)


def test_transposed_errors_say_what_is_wrong():
    ct = registry.get("conv_transpose2d")
    with pytest.raises(OpError, match=r"output_padding \(2, 2\) must be >= 0 and smaller than stride"):
        ct.canon({"stride": 2, "output_padding": 2})
    with pytest.raises(ShapeError, match="must have x's 4 input channels first"):
        ct.infer(ct.canon({}), [np.zeros((1, 4, 3, 3)), np.zeros((3, 4, 3, 3))])
    with pytest.raises(ShapeError, match="empty output"):
        ct.infer(ct.canon({"padding": 3}), [np.zeros((1, 4, 1, 1)), np.zeros((4, 2, 3, 3))])
