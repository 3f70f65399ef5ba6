"""Pooling: max and average over windows, global average; each with its gradient.

Kernels loop over the KH*KW kernel offsets, each a strided [N,C,OH,OW] view of
the padded input, in row-major order: whole-tensor numpy operations per offset,
and a fixed order of the sums, so overlapping windows add up the same way on
every run. Max pooling routes each window's gradient to its first maximal
element in row-major order.
"""
from __future__ import annotations

import itertools

import numpy as np

from .cuda_launch import IN, OUT, STRIDE_BLOCKS, THREADS, Coverage, Launch, cdiv, grid_stride, i32, i64, kernel_name
from .registry import (Cost, Op, OpError, ShapeError, check_attrs, emit, int_pair, nbytes, numel, register,
                       require_float, same_dtype)


def _canon_pool(attrs, extra=(), avg=False):
    """kernel, stride (default: the kernel) and padding, count_include_pad for average pooling,
    plus the spatial size named in ``extra`` (for the gradients)."""
    allowed = {"kernel": None, "stride": None, "padding": 0, **{k: None for k in extra}}
    if avg:
        allowed["count_include_pad"] = True
    a = check_attrs(attrs, allowed, required=("kernel", *extra))
    kernel = int_pair(a["kernel"], "kernel")
    out = {"kernel": kernel, "stride": int_pair(kernel if a["stride"] is None else a["stride"], "stride"),
           "padding": int_pair(a["padding"], "padding")}
    if min(kernel) < 1 or min(out["stride"]) < 1 or min(out["padding"]) < 0:
        raise OpError(f"kernel and stride must be >= 1 and padding >= 0, got {out}")
    # Every window then holds at least one real element: no all-padding max, no empty average.
    if out["padding"][0] * 2 > kernel[0] or out["padding"][1] * 2 > kernel[1]:
        raise OpError(f"padding {out['padding']} must be at most half the kernel {kernel}")
    if avg:
        out["count_include_pad"] = bool(a["count_include_pad"])
    for k in extra:
        out[k] = int_pair(a[k], k)
    return out


def _pooled_shape(shape, attrs):
    shape = tuple(shape)
    if len(shape) != 4:
        raise ShapeError(f"needs x [N,C,H,W], got shape {shape}")
    n, c, h, w = shape
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel"], attrs["stride"], attrs["padding"]
    if h + 2 * ph < kh or w + 2 * pw < kw:
        raise ShapeError(f"kernel {kh}x{kw} does not fit input {h}x{w} (x {shape}) with padding {(ph, pw)}: "
                         f"the padded input must be at least {kh}x{kw}")
    return n, c, (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1


def _check_dy(dy_shape, x_shape, attrs):
    expect = _pooled_shape(x_shape, attrs)
    if tuple(dy_shape) != expect:
        raise ShapeError(f"dy {tuple(dy_shape)} does not match pooling of input {tuple(x_shape)}: expected {expect}")


def _pool_cost(attrs, ins, outs, windows) -> Cost:
    """One flop per element of each window; a gradient visits the same windows as its forward pass."""
    moved = sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs)
    return Cost(float(windows * attrs["kernel"][0] * attrs["kernel"][1]), float(moved))


def _padded(x, padding, fill):
    ph, pw = padding
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill) if ph or pw else x


def _offsets(xp, attrs, out_hw):
    """The strided [N,C,OH,OW] views of padded ``xp``, one per kernel offset, in row-major order."""
    (kh, kw), (sh, sw), (oh, ow) = attrs["kernel"], attrs["stride"], out_hw
    for i in range(kh):
        for j in range(kw):
            yield xp[:, :, i:i + sh * oh:sh, j:j + sw * ow:sw]


def _scatter(parts, dx, attrs, out_hw):
    """dx = the sum, in kernel-offset order, of each offset's part placed at its window positions."""
    (ph, pw), (h, w) = attrs["padding"], dx.shape[2:]
    dxp = np.zeros((*dx.shape[:2], h + 2 * ph, w + 2 * pw), dtype=dx.dtype)
    for view, part in zip(_offsets(dxp, attrs, out_hw), parts):
        view += part
    np.copyto(dx, dxp[:, :, ph:ph + h, pw:pw + w])


def _window_sums(x, attrs, out):
    """out[N,C,OH,OW] = the sum of each zero-padded window, added in kernel-offset order."""
    views = _offsets(_padded(x, attrs["padding"], 0), attrs, out.shape[2:])
    np.copyto(out, next(views))
    for v in views:
        out += v


def _avg_divisor(x_hw, attrs, out_hw, dtype):
    """The number of elements each window averages: the kernel area, or the real (unpadded) ones."""
    kh, kw = attrs["kernel"]
    if attrs["count_include_pad"]:
        return dtype.type(kh * kw)
    count = np.empty((1, 1, *out_hw), dtype=dtype)
    _window_sums(np.ones((1, 1, *x_hw), dtype=dtype), attrs, count)
    return count


def _first_max_parts(windows, y, dy):
    """Per kernel offset, in order: dy where this offset holds its window's first maximum, else 0."""
    routed = np.zeros(y.shape, dtype=bool)     # windows whose maximum an earlier offset took
    zero = dy.dtype.type(0)
    for v in windows:
        first = (v == y) & ~routed
        routed |= first
        yield np.where(first, dy, zero)


def _pool_dims(x_shape, y_shape, attrs) -> tuple:
    """pooling.cu's POOL_PARAMS: N, C, H, W, OH, OW, KH, KW, sh, sw, ph, pw."""
    n, c, h, w = x_shape
    return tuple(i32(v) for v in (n, c, h, w, *y_shape[2:], *attrs["kernel"], *attrs["stride"], *attrs["padding"]))


def _pool_launch(base, attrs, x_shape, y_shape, out, args) -> list:
    """One thread per element of ``out`` (grid-stride), with the pooling geometry appended."""
    extra = (i32(attrs["count_include_pad"]),) if "count_include_pad" in attrs else ()
    return [grid_stride(kernel_name(base, out.dtype), numel(out.shape),
                        (*args, *_pool_dims(x_shape, y_shape, attrs), *extra), OUT(0))]


class _WindowPool(Op):
    """Max and average pooling share their shape rule and cost."""

    def infer(self, attrs, ins):
        require_float(ins[0].dtype)
        return [(_pooled_shape(ins[0].shape, attrs), np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        return _pool_cost(attrs, ins, outs, numel(outs[0].shape))


@register
class MaxPool2d(_WindowPool):
    """x[N,C,H,W] -> y[N,C,OH,OW]; padding counts as -inf."""
    name = "max_pool2d"
    cuda_kernels = ("max_pool2d_fwd",)

    def canon(self, attrs):
        return _canon_pool(attrs)

    def gradient(self, g, node, dys, wanted):
        return [emit(g, "max_pool2d_grad", [node.inputs[0], node.outputs[0], dys[0]], **node.attrs)]

    def cuda_launches(self, attrs, ins, outs):
        return _pool_launch("max_pool2d_fwd", attrs, ins[0].shape, outs[0].shape, outs[0], (OUT(0), IN(0)))

    def compute(self, attrs, xs, ys):
        y = ys[0]
        views = _offsets(_padded(xs[0], attrs["padding"], -np.inf), attrs, y.shape[2:])
        np.copyto(y, next(views))
        for v in views:
            np.maximum(y, v, out=y)


@register
class MaxPool2dGrad(Op):
    """(x, y, dy) -> dx: each window's gradient goes to its first element equal to the window's max y."""
    name, arity, differentiable = "max_pool2d_grad", 3, False
    cuda_kernels = ("max_pool2d_bwd",)

    def canon(self, attrs):
        return _canon_pool(attrs)

    def infer(self, attrs, ins):
        x, y, dy = ins
        _check_dy(dy.shape, x.shape, attrs)
        if tuple(y.shape) != tuple(dy.shape):
            raise ShapeError(f"y {tuple(y.shape)} and dy {tuple(dy.shape)} must have the same shape")
        dtype = same_dtype(ins)
        require_float(dtype)
        return [(tuple(x.shape), dtype)]

    def cost(self, attrs, ins, outs):
        return _pool_cost(attrs, ins, outs, numel(ins[2].shape))

    def cuda_launches(self, attrs, ins, outs):     # one thread per element of dx
        return _pool_launch("max_pool2d_bwd", attrs, ins[0].shape, ins[2].shape, outs[0],
                            (OUT(0), IN(0), IN(1), IN(2)))

    def compute(self, attrs, xs, ys):
        x, y, dy = xs
        windows = _offsets(_padded(x, attrs["padding"], -np.inf), attrs, y.shape[2:])
        _scatter(_first_max_parts(windows, y, dy), ys[0], attrs, y.shape[2:])


@register
class AvgPool2d(_WindowPool):
    """x[N,C,H,W] -> y[N,C,OH,OW]; padding counts as 0, and in the divisor if count_include_pad."""
    name = "avg_pool2d"
    cuda_kernels = ("avg_pool2d_fwd",)

    def canon(self, attrs):
        return _canon_pool(attrs, avg=True)

    def gradient(self, g, node, dys, wanted):
        return [emit(g, "avg_pool2d_grad", [dys[0]], input_hw=g.shape(node.inputs[0])[2:], **node.attrs)]

    def cuda_launches(self, attrs, ins, outs):
        return _pool_launch("avg_pool2d_fwd", attrs, ins[0].shape, outs[0].shape, outs[0], (OUT(0), IN(0)))

    def compute(self, attrs, xs, ys):
        x, y = xs[0], ys[0]
        _window_sums(x, attrs, y)
        y /= _avg_divisor(x.shape[2:], attrs, y.shape[2:], y.dtype)


@register
class AvgPool2dGrad(Op):
    """dy -> dx[N,C,H,W] with H, W from input_hw: each window's share of dy, summed over windows."""
    name, differentiable = "avg_pool2d_grad", False
    cuda_kernels = ("avg_pool2d_bwd",)

    def canon(self, attrs):
        return _canon_pool(attrs, extra=("input_hw",), avg=True)

    def infer(self, attrs, ins):
        dy = ins[0]
        require_float(dy.dtype)
        if len(dy.shape) != 4:
            raise ShapeError(f"needs dy [N,C,OH,OW], got shape {tuple(dy.shape)}")
        x_shape = (*dy.shape[:2], *attrs["input_hw"])
        _check_dy(dy.shape, x_shape, attrs)
        return [(x_shape, np.dtype(dy.dtype))]

    def cost(self, attrs, ins, outs):
        return _pool_cost(attrs, ins, outs, numel(ins[0].shape))

    def cuda_launches(self, attrs, ins, outs):     # one thread per element of dx
        return _pool_launch("avg_pool2d_bwd", attrs, outs[0].shape, ins[0].shape, outs[0], (OUT(0), IN(0)))

    def compute(self, attrs, xs, ys):
        dy, dx = xs[0], ys[0]
        share = dy / _avg_divisor(dx.shape[2:], attrs, dy.shape[2:], dy.dtype)
        _scatter(itertools.repeat(share), dx, attrs, dy.shape[2:])


@register
class GlobalAvgPool(Op):
    """x[N,C,H,W] -> y[N,C], the mean over H and W."""
    name = "global_avg_pool"
    cuda_kernels = ("global_avg_pool_fwd",)

    def infer(self, attrs, ins):
        if len(ins[0].shape) != 4:
            raise ShapeError(f"needs x [N,C,H,W], got shape {tuple(ins[0].shape)}")
        require_float(ins[0].dtype)
        return [(tuple(ins[0].shape[:2]), np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        return Cost(float(numel(ins[0].shape)), float(nbytes(ins[0]) + nbytes(outs[0])))

    def gradient(self, g, node, dys, wanted):
        return [emit(g, "global_avg_pool_grad", [dys[0]], input_hw=g.shape(node.inputs[0])[2:])]

    def cuda_launches(self, attrs, ins, outs):
        """One warp per (n, c) plane, eight planes per block."""
        n, c, h, w = ins[0].shape
        planes, warps = n * c, THREADS // 32
        blocks = max(1, min(cdiv(planes, warps), STRIDE_BLOCKS))
        return [Launch(kernel_name("global_avg_pool_fwd", outs[0].dtype), (blocks, 1, 1), (THREADS, 1, 1), 0,
                       (OUT(0), IN(0), i64(planes), i32(h * w)), Coverage(OUT(0), (planes,), (0,)))]

    def compute(self, attrs, xs, ys):
        np.mean(xs[0], axis=(2, 3), out=ys[0])


@register
class GlobalAvgPoolGrad(Op):
    """dy[N,C] -> dx[N,C,H,W] = dy / (H*W) everywhere, with H, W from input_hw."""
    name, differentiable = "global_avg_pool_grad", False
    cuda_kernels = ("global_avg_pool_bwd",)

    def canon(self, attrs):
        a = check_attrs(attrs, {"input_hw": None}, required=["input_hw"])
        hw = int_pair(a["input_hw"], "input_hw")
        if min(hw) < 1:
            raise OpError(f"input_hw must be positive, got {hw}")
        return {"input_hw": hw}

    def infer(self, attrs, ins):
        if len(ins[0].shape) != 2:
            raise ShapeError(f"needs dy [N,C], got shape {tuple(ins[0].shape)}")
        require_float(ins[0].dtype)
        return [((*ins[0].shape, *attrs["input_hw"]), np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        return Cost(float(numel(outs[0].shape)), float(nbytes(ins[0]) + nbytes(outs[0])))

    def cuda_launches(self, attrs, ins, outs):
        h, w = attrs["input_hw"]
        planes = numel(ins[0].shape)
        return [grid_stride(kernel_name("global_avg_pool_bwd", outs[0].dtype), planes * h * w,
                            (OUT(0), IN(0), i64(planes), i32(h * w)), OUT(0))]

    def compute(self, attrs, xs, ys):
        dy = xs[0]
        h, w = attrs["input_hw"]
        np.copyto(ys[0], (dy / dy.dtype.type(h * w))[:, :, None, None])
