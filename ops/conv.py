"""2-D convolution (with stride, padding and groups) and its two gradients.

Kernels use im2col: a strided window view of the padded input, copied once
into a (groups, N*OH*OW, C/groups*KH*KW) matrix, then one batched matmul over
the groups, so depthwise convolution (groups == C) costs no Python loop per
channel. The data gradient scatters back with a fixed loop over the KH*KW
kernel offsets, so its sums run in the same order on every run.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .registry import Cost, Op, OpError, ShapeError, check_attrs, emit, int_pair, register, same_dtype, \
    require_float


def _canon_conv(attrs, extra=()):
    a = check_attrs(attrs, {"stride": 1, "padding": 0, "groups": 1, **{k: None for k in extra}},
                    required=extra)
    out = {"stride": int_pair(a["stride"], "stride"), "padding": int_pair(a["padding"], "padding"),
           "groups": int(a["groups"])}
    if min(out["stride"]) < 1 or min(out["padding"]) < 0 or out["groups"] < 1:
        raise OpError(f"stride must be >= 1, padding >= 0 and groups >= 1, got {out}")
    for k in extra:
        out[k] = int_pair(a[k], k)
    return out


def out_hw(h, w, kh, kw, stride, padding):
    return (h + 2 * padding[0] - kh) // stride[0] + 1, (w + 2 * padding[1] - kw) // stride[1] + 1


def _check_geometry(x_shape, w_shape, attrs):
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise ShapeError(f"needs x [N,C,H,W] and w [O,C/groups,KH,KW], got {x_shape} and {w_shape}")
    n, c, h, w = x_shape
    o, cg, kh, kw = w_shape
    g = attrs["groups"]
    if c % g or o % g:
        raise ShapeError(f"groups={g} must divide the input channels ({c}) and the output channels ({o})")
    if cg != c // g:
        raise ShapeError(f"weight {w_shape} needs {c // g} input channels per group (x {x_shape}, groups={g})")
    oh, ow = out_hw(h, w, kh, kw, attrs["stride"], attrs["padding"])
    if oh < 1 or ow < 1:
        raise ShapeError(f"kernel {kh}x{kw} does not fit input {h}x{w} with padding {attrs['padding']}")
    return n, c, h, w, o, cg, kh, kw, g, oh, ow


def _conv_cost(x_shape, w_shape, attrs, moved):
    n, c, h, w, o, cg, kh, kw, g, oh, ow = _check_geometry(x_shape, w_shape, attrs)
    return Cost(2.0 * n * o * oh * ow * cg * kh * kw, float(moved))


def _columns(x, kh, kw, attrs):
    """im2col: (groups, N*OH*OW, C/groups*KH*KW), a fresh contiguous array."""
    n, c = x.shape[:2]
    (sh, sw), (ph, pw), g = attrs["stride"], attrs["padding"], attrs["groups"]
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if ph or pw else x
    win = sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]   # N,C,OH,OW,KH,KW
    oh, ow = win.shape[2:4]
    win = win.reshape(n, g, c // g, oh, ow, kh, kw)
    return np.ascontiguousarray(win.transpose(1, 0, 3, 4, 2, 5, 6)).reshape(g, n * oh * ow, -1), oh, ow


def _dy_groups(dy, g):
    """(groups, N*OH*OW, O/groups) view-copy of dy [N,O,OH,OW]."""
    n, o, oh, ow = dy.shape
    return np.ascontiguousarray(dy.reshape(n, g, o // g, oh, ow).transpose(1, 0, 3, 4, 2)).reshape(g, -1, o // g)


@register
class Conv2d(Op):
    name, arity = "conv2d", 2
    cuda_kernels = ("conv2d_fwd",)

    def canon(self, attrs):
        return _canon_conv(attrs)

    def infer(self, attrs, ins):
        x, w = ins
        dt = same_dtype(ins)
        require_float(dt)
        n, c, h, wd, o, cg, kh, kw, g, oh, ow = _check_geometry(x.shape, w.shape, attrs)
        return [((n, o, oh, ow), dt)]

    def cost(self, attrs, ins, outs):
        return _conv_cost(ins[0].shape, ins[1].shape, attrs, super().cost(attrs, ins, outs).bytes)

    def gradient(self, g, node, dys, wanted):
        x, w = node.inputs
        a = node.attrs
        dx = emit(g, "conv2d_grad_data", [w, dys[0]], input_hw=g.shape(x)[2:], **a) if wanted[0] else None
        dw = emit(g, "conv2d_grad_weight", [x, dys[0]], kernel_hw=g.shape(w)[2:], **a) if wanted[1] else None
        return [dx, dw]

    def compute(self, attrs, xs, ys):
        x, w = xs
        o, cg, kh, kw = w.shape
        g = attrs["groups"]
        cols, oh, ow = _columns(x, kh, kw, attrs)
        out = np.matmul(cols, w.reshape(g, o // g, -1).transpose(0, 2, 1))       # g, N*OH*OW, O/g
        n = x.shape[0]
        np.copyto(ys[0], out.reshape(g, n, oh, ow, o // g).transpose(1, 0, 4, 2, 3).reshape(n, o, oh, ow))


@register
class Conv2dGradData(Op):
    """dx from the weights and the output gradient (x itself is not needed)."""
    name, arity, differentiable = "conv2d_grad_data", 2, False
    cuda_kernels = ("conv2d_grad_data",)

    def canon(self, attrs):
        return _canon_conv(attrs, extra=("input_hw",))

    def infer(self, attrs, ins):
        w, dy = ins
        dt = same_dtype(ins)
        o, cg, kh, kw = w.shape
        if len(dy.shape) != 4 or dy.shape[1] != o:
            raise ShapeError(f"output gradient {dy.shape} does not match weight {w.shape}")
        x_shape = (dy.shape[0], cg * attrs["groups"], *attrs["input_hw"])
        _, _, _, _, _, _, _, _, _, oh, ow = _check_geometry(x_shape, w.shape, attrs)
        if (oh, ow) != tuple(dy.shape[2:]):
            raise ShapeError(f"output gradient {dy.shape} does not match input {x_shape} and weight {w.shape}")
        return [(x_shape, dt)]

    def cost(self, attrs, ins, outs):
        return _conv_cost(outs[0].shape, ins[0].shape, attrs, super().cost(attrs, ins, outs).bytes)

    def compute(self, attrs, xs, ys):
        w, dy = xs
        o, cg, kh, kw = w.shape
        g = attrs["groups"]
        n, c, h, wd = ys[0].shape
        (sh, sw), (ph, pw) = attrs["stride"], attrs["padding"]
        oh, ow = dy.shape[2:]
        dcols = np.matmul(_dy_groups(dy, g), w.reshape(g, o // g, -1))            # g, N*OH*OW, Cg*KH*KW
        dcols = dcols.reshape(g, n, oh, ow, cg, kh, kw).transpose(1, 0, 4, 2, 3, 5, 6).reshape(n, c, oh, ow, kh, kw)
        dxp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw), dtype=ys[0].dtype)
        for i in range(kh):            # fixed order: deterministic sums
            for j in range(kw):
                dxp[:, :, i:i + sh * oh:sh, j:j + sw * ow:sw] += dcols[..., i, j]
        np.copyto(ys[0], dxp[:, :, ph:ph + h, pw:pw + wd])


@register
class Conv2dGradWeight(Op):
    """dw from the input and the output gradient."""
    name, arity, differentiable = "conv2d_grad_weight", 2, False
    cuda_kernels = ("conv2d_grad_weight",)

    def canon(self, attrs):
        return _canon_conv(attrs, extra=("kernel_hw",))

    def infer(self, attrs, ins):
        x, dy = ins
        dt = same_dtype(ins)
        if len(x.shape) != 4 or len(dy.shape) != 4:
            raise ShapeError(f"needs x [N,C,H,W] and dy [N,O,OH,OW], got {x.shape} and {dy.shape}")
        g = attrs["groups"]
        w_shape = (dy.shape[1], x.shape[1] // g, *attrs["kernel_hw"])
        _, _, _, _, _, _, _, _, _, oh, ow = _check_geometry(x.shape, w_shape, attrs)
        if (oh, ow) != tuple(dy.shape[2:]) or dy.shape[0] != x.shape[0]:
            raise ShapeError(f"output gradient {dy.shape} does not match input {x.shape}")
        return [(w_shape, dt)]

    def cost(self, attrs, ins, outs):
        return _conv_cost(ins[0].shape, outs[0].shape, attrs, super().cost(attrs, ins, outs).bytes)

    def compute(self, attrs, xs, ys):
        x, dy = xs
        o, cg, kh, kw = ys[0].shape
        g = attrs["groups"]
        cols, _, _ = _columns(x, kh, kw, attrs)
        dw = np.matmul(_dy_groups(dy, g).transpose(0, 2, 1), cols)                  # g, O/g, Cg*KH*KW
        np.copyto(ys[0], dw.reshape(o, cg, kh, kw))
