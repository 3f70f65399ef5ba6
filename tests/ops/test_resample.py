"""ops/resample.py: bilinear upsampling (both corner conventions) and reflection padding, their
gradients against float64 finite differences, against direct per-pixel definitions, and their
errors. PyTorch parity is in test_torch_parity.py."""
import numpy as np
import pytest

from ops import registry
from ops.registry import OpError, ShapeError

from .opcheck import check_gradient, run_op

rng = np.random.default_rng(0)

# (input H, W, output H, W): up by integer and odd factors, down, from and to one pixel
SIZES = [((4, 5), (8, 10)), ((33, 7), (129, 25)), ((6, 6), (4, 3)), ((1, 3), (5, 4)), ((5, 4), (1, 1))]


def per_pixel_bilinear(x, size, align_corners):
    """PyTorch's formula, pixel by pixel, in float64."""
    h, w = x.shape[2:]
    oh, ow = size

    def source(p, n_in, n_out):
        if align_corners:
            src = p * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            src = max((p + 0.5) * n_in / n_out - 0.5, 0.0)
        i0 = min(int(src), n_in - 1)
        return i0, min(i0 + 1, n_in - 1), src - i0

    y = np.zeros((*x.shape[:2], oh, ow))
    for p in range(oh):
        i0, i1, lh = source(p, h, oh)
        for q in range(ow):
            j0, j1, lw = source(q, w, ow)
            y[:, :, p, q] = ((1 - lh) * ((1 - lw) * x[:, :, i0, j0] + lw * x[:, :, i0, j1])
                             + lh * ((1 - lw) * x[:, :, i1, j0] + lw * x[:, :, i1, j1]))
    return y


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("hw,size", SIZES)
def test_upsample_matches_the_per_pixel_formula(hw, size, align_corners):
    x = rng.standard_normal((2, 3, *hw))
    (y,) = run_op("upsample_bilinear2d", [x], size=size, align_corners=align_corners)
    np.testing.assert_allclose(y, per_pixel_bilinear(x, size, align_corners), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("hw,size", SIZES)
def test_upsample_gradient_matches_finite_differences(hw, size, align_corners):
    check_gradient("upsample_bilinear2d", [rng.standard_normal((1, 2, *hw))],
                   attrs={"size": size, "align_corners": align_corners}, max_points=20)


def test_upsample_errors():
    up = registry.get("upsample_bilinear2d")
    with pytest.raises(OpError, match="missing attributes"):
        up.canon({})
    with pytest.raises(OpError, match="size must be positive"):
        up.canon({"size": (0, 3)})
    with pytest.raises(ShapeError, match=r"x must be a non-empty 4-D \[N,C,H,W\] tensor"):
        up.infer(up.canon({"size": 4}), [np.zeros((3, 4, 4))])


@pytest.mark.parametrize("hw,pad", [((5, 6), (2, 3)), ((4, 4), 3), ((7, 2), (1, 0)), ((3, 5), 1)])
def test_reflection_pad_is_numpy_s_reflect_and_its_gradient_is_the_adjoint(hw, pad):
    x = rng.standard_normal((2, 3, *hw))
    (y,) = run_op("reflection_pad2d", [x], padding=pad)
    ph, pw = (pad, pad) if isinstance(pad, int) else pad
    assert np.array_equal(y, np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), mode="reflect"))
    dy = rng.standard_normal(y.shape)
    (dx,) = run_op("reflection_pad2d_grad", [dy], padding=pad, input_hw=hw)
    assert np.sum(x * dx) == pytest.approx(np.sum(y * dy), rel=1e-12)
    check_gradient("reflection_pad2d", [x], attrs={"padding": pad}, max_points=20)


def test_reflection_pad_errors():
    pad = registry.get("reflection_pad2d")
    with pytest.raises(ShapeError, match=r"reflection padding \(3, 3\) must be smaller than the input's height "
                                         r"and width \(3, 8\)"):
        pad.infer(pad.canon({"padding": 3}), [np.zeros((1, 1, 3, 8))])
    with pytest.raises(OpError, match="padding must be >= 0"):
        pad.canon({"padding": -1})
    grad = registry.get("reflection_pad2d_grad")
    with pytest.raises(ShapeError, match=r"expected \(7, 8\) pixels"):
        grad.infer(grad.canon({"padding": 2, "input_hw": (3, 4)}), [np.zeros((1, 1, 7, 7))])


def test_float32_stays_float32_and_is_deterministic():
    x = rng.standard_normal((2, 3, 9, 7)).astype(np.float32)
    for op, attrs in (("upsample_bilinear2d", {"size": (33, 20)}), ("reflection_pad2d", {"padding": 3})):
        a, b = run_op(op, [x], **attrs)[0], run_op(op, [x.copy()], **attrs)[0]
        assert a.dtype == np.float32 and np.array_equal(a, b)


def test_every_resampling_case_runs_on_the_host_emulated_kernels():
    """test_cuda_emulated runs the smallest case of each operator; the gathers' row and column
    ranges need the others too (up by 4, odd factors, align_corners, one-pixel inputs)."""
    from . import cuda_emulator
    from .cuda_cases import all_cases
    from .test_cuda_emulated import emulation_failures
    if not cuda_emulator.available():
        pytest.skip("g++ is needed to build the host emulation")
    cases = [c for c in all_cases() if c.decl.__module__ == "ops.resample"]
    assert len(cases) >= 16
    failures = emulation_failures(cases)
    assert not failures, "\n".join(failures)
