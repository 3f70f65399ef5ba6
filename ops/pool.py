"""Pooling: max and average over windows, global average; each with its gradient.

Gradients scatter with a fixed loop over the kernel offsets, so overlapping
windows add in the same order on every run; max pooling routes each window's
gradient to its first maximal element in row-major order.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .registry import Op, OpError, ShapeError, check_attrs, emit, int_pair, register, require_float, same_dtype


def _canon_pool(attrs, extra=(), avg=False):
    allowed = {"kernel": None, "stride": None, "padding": 0, **{k: None for k in extra}}
    if avg:
        allowed["count_include_pad"] = True
    a = check_attrs(attrs, allowed, required=("kernel", *extra))
    kernel = int_pair(a["kernel"], "kernel")
    out = {"kernel": kernel, "stride": int_pair(a["stride"] if a["stride"] is not None else kernel, "stride"),
           "padding": int_pair(a["padding"], "padding")}
    if min(kernel) < 1 or min(out["stride"]) < 1 or min(out["padding"]) < 0:
        raise OpError(f"kernel and stride must be >= 1 and padding >= 0, got {out}")
    if out["padding"][0] * 2 > kernel[0] or out["padding"][1] * 2 > kernel[1]:
        raise OpError(f"padding {out['padding']} must be at most half the kernel {kernel}")
    if avg:
        out["count_include_pad"] = bool(a["count_include_pad"])
    for k in extra:
        out[k] = int_pair(a[k], k)
    return out


def _pooled_shape(shape, attrs):
    if len(shape) != 4:
        raise ShapeError(f"needs x [N,C,H,W], got {shape}")
    n, c, h, w = shape
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel"], attrs["stride"], attrs["padding"]
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    if oh < 1 or ow < 1:
        raise ShapeError(f"kernel {kh}x{kw} does not fit input {h}x{w} with padding {attrs['padding']}")
    return n, c, oh, ow


def _windows(x, attrs, fill):
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel"], attrs["stride"], attrs["padding"]
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill) if ph or pw else x
    return sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]   # N,C,OH,OW,KH,KW


def _scatter(parts, x_shape, attrs, dtype):
    """dx from per-offset gradients parts(i, j) -> [N,C,OH,OW], added in a fixed order."""
    n, c, h, w = x_shape
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel"], attrs["stride"], attrs["padding"]
    dxp = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=dtype)
    for i in range(kh):
        for j in range(kw):
            part = parts(i, j)
            oh, ow = part.shape[2:]
            dxp[:, :, i:i + sh * oh:sh, j:j + sw * ow:sw] += part
    return dxp[:, :, ph:ph + h, pw:pw + w]


def _avg_divisor(x_shape, attrs, dtype):
    """Per output position: the number of elements averaged (the kernel area, or the valid ones)."""
    kh, kw = attrs["kernel"]
    if attrs["count_include_pad"]:
        return dtype.type(kh * kw)
    ones = np.ones((1, 1, *x_shape[2:]), dtype=dtype)
    return _windows(ones, attrs, 0).sum(axis=(-2, -1), dtype=dtype)


class _PoolBase(Op):
    def infer(self, attrs, ins):
        require_float(ins[0].dtype)
        return [(_pooled_shape(ins[0].shape, attrs), np.dtype(ins[0].dtype))]


@register
class MaxPool2d(_PoolBase):
    name = "max_pool2d"
    cuda_kernels = ("max_pool2d_fwd",)

    def canon(self, attrs):
        return _canon_pool(attrs)

    def gradient(self, g, node, dys, wanted):
        return [emit(g, "max_pool2d_grad", [node.inputs[0], dys[0]], **node.attrs)]

    def compute(self, attrs, xs, ys):
        np.max(_windows(xs[0], attrs, -np.inf), axis=(-2, -1), out=ys[0])


@register
class MaxPool2dGrad(Op):
    """dx from x and dy: each window's gradient goes to its first maximal element."""
    name, arity, differentiable = "max_pool2d_grad", 2, False
    cuda_kernels = ("max_pool2d_bwd",)

    def canon(self, attrs):
        return _canon_pool(attrs)

    def infer(self, attrs, ins):
        x, dy = ins
        if _pooled_shape(x.shape, attrs) != tuple(dy.shape):
            raise ShapeError(f"output gradient {dy.shape} does not match pooling of {x.shape}")
        return [(tuple(x.shape), same_dtype(ins))]

    def compute(self, attrs, xs, ys):
        x, dy = xs
        win = _windows(x, attrs, -np.inf)
        kh, kw = attrs["kernel"]
        first = win.reshape(*win.shape[:4], kh * kw).argmax(axis=-1)
        zero = dy.dtype.type(0)
        ys[0][...] = _scatter(lambda i, j: np.where(first == i * kw + j, dy, zero), x.shape, attrs, dy.dtype)


@register
class AvgPool2d(_PoolBase):
    name = "avg_pool2d"
    cuda_kernels = ("avg_pool2d_fwd",)

    def canon(self, attrs):
        return _canon_pool(attrs, avg=True)

    def gradient(self, g, node, dys, wanted):
        return [emit(g, "avg_pool2d_grad", [dys[0]], input_hw=g.shape(node.inputs[0])[2:], **node.attrs)]

    def compute(self, attrs, xs, ys):
        x = xs[0]
        total = _windows(x, attrs, 0).sum(axis=(-2, -1), dtype=x.dtype)
        np.divide(total, _avg_divisor(x.shape, attrs, x.dtype), out=ys[0])


@register
class AvgPool2dGrad(Op):
    name, arity, differentiable = "avg_pool2d_grad", 1, False
    cuda_kernels = ("avg_pool2d_bwd",)

    def canon(self, attrs):
        return _canon_pool(attrs, extra=("input_hw",), avg=True)

    def infer(self, attrs, ins):
        dy = ins[0]
        x_shape = (*dy.shape[:2], *attrs["input_hw"]) if len(dy.shape) == 4 else dy.shape
        if _pooled_shape(x_shape, attrs) != tuple(dy.shape):
            raise ShapeError(f"output gradient {dy.shape} does not match pooling of {x_shape}")
        return [(tuple(x_shape), np.dtype(dy.dtype))]

    def compute(self, attrs, xs, ys):
        dy = xs[0]
        share = dy / _avg_divisor(ys[0].shape, attrs, dy.dtype)
        ys[0][...] = _scatter(lambda i, j: share, ys[0].shape, attrs, dy.dtype)


@register
class GlobalAvgPool(Op):
    name = "global_avg_pool"
    cuda_kernels = ("global_avg_pool_fwd",)

    def canon(self, attrs):
        return super().canon(attrs)

    def infer(self, attrs, ins):
        if len(ins[0].shape) != 4:
            raise ShapeError(f"needs x [N,C,H,W], got {ins[0].shape}")
        require_float(ins[0].dtype)
        return [(tuple(ins[0].shape[:2]), np.dtype(ins[0].dtype))]

    def gradient(self, g, node, dys, wanted):
        return [emit(g, "global_avg_pool_grad", [dys[0]], input_hw=g.shape(node.inputs[0])[2:])]

    def compute(self, attrs, xs, ys):
        x = xs[0]
        np.divide(x.sum(axis=(2, 3), dtype=x.dtype), x.dtype.type(x.shape[2] * x.shape[3]), out=ys[0])


@register
class GlobalAvgPoolGrad(Op):
    name, differentiable = "global_avg_pool_grad", False
    cuda_kernels = ("global_avg_pool_bwd",)

    def canon(self, attrs):
        a = check_attrs(attrs, {"input_hw": None}, required=["input_hw"])
        return {"input_hw": int_pair(a["input_hw"], "input_hw")}

    def infer(self, attrs, ins):
        if len(ins[0].shape) != 2:
            raise ShapeError(f"needs dy [N,C], got {ins[0].shape}")
        return [((*ins[0].shape, *attrs["input_hw"]), np.dtype(ins[0].dtype))]

    def compute(self, attrs, xs, ys):
        dy = xs[0]
        h, w = attrs["input_hw"]
        ys[0][...] = (dy / dy.dtype.type(h * w))[:, :, None, None]
