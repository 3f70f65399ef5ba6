"""Spatial resampling of [N,C,H,W] images: bilinear upsampling (DeepLabv3+'s decoder) and
reflection padding (Pix2PixHD's generator), each with a deterministic gradient.

``upsample_bilinear2d(x; size, align_corners)`` is PyTorch's F.interpolate(mode="bilinear")
to an output size: output row p reads input rows i0 <= i1 = min(i0 + 1, H - 1) with weights
(1 - l, l), where src = p * (H - 1) / (OH - 1) with align_corners (0 when OH == 1), else
max(0, (p + 0.5) * H / OH - 0.5), i0 = min(floor(src), H - 1) and l = src - i0 (PyTorch's
area_pixel_compute_source_index), columns alike. Being separable, y = A x B^T per plane with
A [OH,H] and B [OW,W] holding each row's two weights; the gradient is dx = A^T dy B, which
the numpy kernel runs as two matrix products and the CUDA kernel as a gather, one thread per
input pixel over the output rows and columns that read it: no scatter, no atomics.

``reflection_pad2d(x; padding)`` is PyTorch's ReflectionPad2d with (ph, pw) on both sides
(each smaller than the axis it pads): output row r reads input row |r - ph| reflected at
H - 1. Its gradient gathers, per input pixel, the at most three output rows (and columns)
that read it.
"""
from __future__ import annotations

import numpy as np

from .cuda_launch import IN, OUT, grid_stride, i32, kernel_name
from .registry import (Cost, Op, OpError, ShapeError, check_attrs, emit, int_pair, nbytes, numel, register,
                       require_float)


def _image(shape, what: str) -> tuple[int, int, int, int]:
    shape = tuple(shape)
    if len(shape) != 4 or 0 in shape:
        raise ShapeError(f"{what} must be a non-empty 4-D [N,C,H,W] tensor, got shape {shape}")
    return shape


def _moved(ins, outs) -> float:
    return float(sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs))


# ------------------------------------------------------------------ bilinear upsampling

def _canon_upsample(attrs, hw_name: str) -> dict:
    a = check_attrs(attrs, {hw_name: None, "align_corners": False}, required=(hw_name,))
    hw = int_pair(a[hw_name], hw_name)
    if min(hw) < 1:
        raise OpError(f"{hw_name} must be positive, got {hw}")
    return {hw_name: hw, "align_corners": bool(a["align_corners"])}


def interpolation_matrix(n_in: int, n_out: int, align_corners: bool, dtype) -> np.ndarray:
    """A [n_out, n_in] with output row p's two weights at i0 and i1 (one weight of 1 where they
    coincide), computed in ``dtype`` as the CUDA kernels compute them."""
    t = np.dtype(dtype).type
    p = np.arange(n_out, dtype=dtype)
    if align_corners:
        scale = t(n_in - 1) / t(n_out - 1) if n_out > 1 else t(0)
        src = scale * p
    else:
        src = np.maximum(t(n_in) / t(n_out) * (p + t(0.5)) - t(0.5), t(0))
    i0 = np.minimum(src.astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    lam = src - i0.astype(dtype)
    a = np.zeros((n_out, n_in), dtype)
    rows = np.arange(n_out)
    a[rows, i0] += t(1) - lam
    a[rows, i1] += lam
    return a


def _matrices(in_hw, out_hw, align_corners, dtype):
    return [interpolation_matrix(i, o, align_corners, dtype) for i, o in zip(in_hw, out_hw)]


def _upsample_cost(big, ins, outs) -> Cost:
    """Four multiply-adds per output pixel of the large side."""
    return Cost(8.0 * numel(big), _moved(ins, outs))


@register
class UpsampleBilinear2d(Op):
    """x[N,C,H,W] -> y[N,C,OH,OW], (OH, OW) = ``size``."""
    name = "upsample_bilinear2d"
    cuda_kernels = ("upsample_bilinear2d_fwd",)

    def canon(self, attrs):
        return _canon_upsample(attrs, "size")

    def infer(self, attrs, ins):
        n, c, _, _ = _image(ins[0].shape, "x")
        require_float(ins[0].dtype)
        return [((n, c, *attrs["size"]), np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        return _upsample_cost(outs[0].shape, ins, outs)

    def gradient(self, g, node, dys, wanted):
        if dys[0] is None or not wanted[0]:
            return [None]
        return [emit(g, "upsample_bilinear2d_grad", [dys[0]], input_hw=g.shape(node.inputs[0])[2:],
                     align_corners=node.attrs["align_corners"])]

    def cuda_launches(self, attrs, ins, outs):
        n, c, h, w = ins[0].shape
        oh, ow = attrs["size"]
        return [grid_stride(kernel_name("upsample_bilinear2d_fwd", outs[0].dtype), numel(outs[0].shape),
                            (OUT(0), IN(0), *(i32(v) for v in (n * c, h, w, oh, ow, attrs["align_corners"]))),
                            OUT(0))]

    def compute(self, attrs, xs, ys):
        x = xs[0]
        a, b = _matrices(x.shape[2:], attrs["size"], attrs["align_corners"], x.dtype)
        np.copyto(ys[0], a @ x @ b.T)


@register
class UpsampleBilinear2dGrad(Op):
    """dy[N,C,OH,OW] -> dx[N,C,H,W] = A^T dy B, (H, W) = ``input_hw``."""
    name, differentiable = "upsample_bilinear2d_grad", False
    cuda_kernels = ("upsample_bilinear2d_bwd",)

    def canon(self, attrs):
        return _canon_upsample(attrs, "input_hw")

    def infer(self, attrs, ins):
        n, c, _, _ = _image(ins[0].shape, "dy")
        require_float(ins[0].dtype)
        return [((n, c, *attrs["input_hw"]), np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        return _upsample_cost(ins[0].shape, ins, outs)

    def cuda_launches(self, attrs, ins, outs):
        n, c, oh, ow = ins[0].shape
        h, w = attrs["input_hw"]
        return [grid_stride(kernel_name("upsample_bilinear2d_bwd", outs[0].dtype), numel(outs[0].shape),
                            (OUT(0), IN(0), *(i32(v) for v in (n * c, h, w, oh, ow, attrs["align_corners"]))),
                            OUT(0))]

    def compute(self, attrs, xs, ys):
        dy = xs[0]
        a, b = _matrices(attrs["input_hw"], dy.shape[2:], attrs["align_corners"], dy.dtype)
        np.copyto(ys[0], a.T @ (dy @ b))


# ------------------------------------------------------------------ reflection padding

def _canon_pad(attrs, extra=()) -> dict:
    a = check_attrs(attrs, {"padding": None, **{k: None for k in extra}}, required=("padding", *extra))
    out = {"padding": int_pair(a["padding"], "padding")}
    if min(out["padding"]) < 0:
        raise OpError(f"padding must be >= 0, got {out['padding']}")
    for k in extra:
        out[k] = int_pair(a[k], k)
    return out


def _check_reflectable(hw, padding, what) -> None:
    if any(p >= s for p, s in zip(padding, hw)):
        raise ShapeError(f"reflection padding {padding} must be smaller than the {what}'s height and width {hw}")


def _fold_reflection(dy: np.ndarray, axis: int, pad: int, n: int) -> np.ndarray:
    """The gradient along one axis: each input index gathers the output indices that read it."""
    dy = np.moveaxis(dy, axis, -1)
    out = dy[..., pad:pad + n].copy()
    if pad:
        out[..., 1:pad + 1] += dy[..., :pad][..., ::-1]
        out[..., n - 1 - pad:n - 1] += dy[..., pad + n:][..., ::-1]
    return np.moveaxis(out, -1, axis)


@register
class ReflectionPad2d(Op):
    """x[N,C,H,W] -> y[N,C,H+2*ph,W+2*pw], the border mirrored without repeating the edge."""
    name = "reflection_pad2d"
    cuda_kernels = ("reflection_pad2d_fwd",)

    def canon(self, attrs):
        return _canon_pad(attrs)

    def infer(self, attrs, ins):
        n, c, h, w = _image(ins[0].shape, "x")
        _check_reflectable((h, w), attrs["padding"], "input")
        ph, pw = attrs["padding"]
        return [((n, c, h + 2 * ph, w + 2 * pw), np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        return Cost(0.0, _moved(ins, outs))

    def gradient(self, g, node, dys, wanted):
        if dys[0] is None or not wanted[0]:
            return [None]
        return [emit(g, "reflection_pad2d_grad", [dys[0]], input_hw=g.shape(node.inputs[0])[2:],
                     padding=node.attrs["padding"])]

    def cuda_launches(self, attrs, ins, outs):
        n, c, h, w = ins[0].shape
        return [grid_stride(kernel_name("reflection_pad2d_fwd", outs[0].dtype), numel(outs[0].shape),
                            (OUT(0), IN(0), *(i32(v) for v in (n * c, h, w, *attrs["padding"]))), OUT(0))]

    def compute(self, attrs, xs, ys):
        ph, pw = attrs["padding"]
        np.copyto(ys[0], np.pad(xs[0], ((0, 0), (0, 0), (ph, ph), (pw, pw)), mode="reflect"))


@register
class ReflectionPad2dGrad(Op):
    """dy[N,C,H+2*ph,W+2*pw] -> dx[N,C,H,W], (H, W) = ``input_hw``."""
    name, differentiable = "reflection_pad2d_grad", False
    cuda_kernels = ("reflection_pad2d_bwd",)

    def canon(self, attrs):
        return _canon_pad(attrs, extra=("input_hw",))

    def infer(self, attrs, ins):
        n, c, oh, ow = _image(ins[0].shape, "dy")
        (h, w), (ph, pw) = attrs["input_hw"], attrs["padding"]
        _check_reflectable((h, w), (ph, pw), "input")
        if (oh, ow) != (h + 2 * ph, w + 2 * pw):
            raise ShapeError(f"dy {tuple(ins[0].shape)} does not match input {(h, w)} padded by {(ph, pw)}: "
                             f"expected {(h + 2 * ph, w + 2 * pw)} pixels")
        return [((n, c, h, w), np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        return Cost(float(numel(ins[0].shape)), _moved(ins, outs))

    def cuda_launches(self, attrs, ins, outs):
        n, c, h, w = outs[0].shape
        return [grid_stride(kernel_name("reflection_pad2d_bwd", outs[0].dtype), numel(outs[0].shape),
                            (OUT(0), IN(0), *(i32(v) for v in (n * c, h, w, *attrs["padding"]))), OUT(0))]

    def compute(self, attrs, xs, ys):
        (h, w), (ph, pw) = attrs["input_hw"], attrs["padding"]
        np.copyto(ys[0], _fold_reflection(_fold_reflection(xs[0], 3, pw, w), 2, ph, h))
