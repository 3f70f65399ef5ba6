"""2-D convolution (stride, padding, dilation, groups; no bias), its two gradients, and the
transposed convolution, whose forward pass is the convolution's data gradient.

Kernels use im2col: the strided window view of the zero-padded input is copied
once into a (groups, C/groups*KH*KW, N*OH*OW) matrix, then one matmul batched
over the groups does the work, so depthwise convolution (groups == C) costs no
Python loop per channel. The copy keeps OH, OW innermost, where the window view
is (near-)contiguous, so it runs at memory speed even for 1x1 and depthwise
kernels. The data gradient scatters back with a fixed loop over the KH*KW
kernel offsets, so its sums run in the same order on every run.

Dilation d spaces a kernel's taps d apart (DeepLab's atrous convolution): the kernel spans
d*(K-1)+1 pixels. Its attribute is kept only when it is not 1, so every graph, plan and
digest made before dilation existed is unchanged.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .cuda_launch import (IN, OUT, WS, gemm_launch, gemm_tiles, grid_stride, i32, i64, kernel_name, per_block,
                          split_k)
from .registry import (Cost, Op, OpError, ShapeError, check_attrs, emit, int_pair, nbytes, numel, register,
                       require_float, same_dtype)


def _canon_conv(attrs, extra=(), optional=()):
    """stride, padding, groups and dilation (absent when 1), plus the spatial size named in
    ``extra`` (for the gradients) and the pairs named in ``optional`` (default 0)."""
    a = check_attrs(attrs, {"stride": 1, "padding": 0, "groups": 1, "dilation": 1, **{k: None for k in extra},
                            **{k: 0 for k in optional}}, required=extra)
    out = {"stride": int_pair(a["stride"], "stride"), "padding": int_pair(a["padding"], "padding"),
           "groups": int(a["groups"])}
    dilation = int_pair(a["dilation"], "dilation")
    if min(out["stride"]) < 1 or min(out["padding"]) < 0 or out["groups"] < 1 or min(dilation) < 1:
        raise OpError(f"stride must be >= 1, dilation >= 1, padding >= 0 and groups >= 1, got "
                      f"{dict(out, dilation=dilation)}")
    if dilation != (1, 1):
        out["dilation"] = dilation
    for k in optional:
        out[k] = int_pair(a[k], k)
    for k in extra:
        out[k] = int_pair(a[k], k)
        if min(out[k]) < 1:
            raise OpError(f"{k} must be positive, got {out[k]}")
    return out


def _dilation(attrs) -> tuple[int, int]:
    return attrs.get("dilation", (1, 1))


def _span(kernel_hw, attrs) -> tuple[int, int]:
    """The pixels a dilated kernel covers: d*(K-1)+1 along each axis."""
    return tuple(d * (k - 1) + 1 for k, d in zip(kernel_hw, _dilation(attrs)))


def _four_d(shape, what):
    shape = tuple(shape)
    if len(shape) != 4:
        raise ShapeError(f"{what} must be 4-D, got shape {shape}")
    return shape


def _out_hw(x_shape, w_shape, attrs) -> tuple[int, int]:
    """Check x [N,C,H,W] against w [O,C/groups,KH,KW]; return the output's (OH, OW)."""
    n, c, h, wd = _four_d(x_shape, "x [N,C,H,W]")
    o, cg, kh, kw = _four_d(w_shape, "w [O,C/groups,KH,KW]")
    g, (sh, sw), (ph, pw) = attrs["groups"], attrs["stride"], attrs["padding"]
    if c % g or o % g:
        raise ShapeError(f"groups={g} must divide the input channels ({c}) and the output channels ({o}) "
                         f"of x {x_shape} and w {w_shape}")
    if cg != c // g:
        raise ShapeError(f"w {w_shape} needs {c // g} input channels per group to match x {x_shape} "
                         f"with groups={g}, i.e. shape {(o, c // g, kh, kw)}")
    kh, kw = _span((kh, kw), attrs)
    if h + 2 * ph < kh or wd + 2 * pw < kw:
        raise ShapeError(f"kernel {kh}x{kw} does not fit input {h}x{wd} (x {x_shape}) with padding {(ph, pw)}: "
                         f"the padded input must be at least {kh}x{kw}")
    return (h + 2 * ph - kh) // sh + 1, (wd + 2 * pw - kw) // sw + 1


def _conv_cost(x_shape, w_shape, attrs, ins, outs) -> Cost:
    """The same multiply-adds for the forward pass and each gradient: 2*N*O*OH*OW*(C/groups)*KH*KW."""
    oh, ow = _out_hw(x_shape, w_shape, attrs)
    o, cg, kh, kw = w_shape
    moved = sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs)
    return Cost(2.0 * x_shape[0] * o * oh * ow * cg * kh * kw, float(moved))


def _padded(x, padding):
    ph, pw = padding
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if ph or pw else x


def _columns(x, kernel_hw, attrs):
    """im2col: a fresh (groups, C/groups*KH*KW, N*OH*OW) array, rows ordered (c, kh, kw)."""
    (sh, sw), (dh, dw), g = attrs["stride"], _dilation(attrs), attrs["groups"]
    win = sliding_window_view(_padded(x, attrs["padding"]), _span(kernel_hw, attrs), axis=(2, 3))
    win = win[:, :, ::sh, ::sw, ::dh, ::dw]
    n, _, oh, ow = win.shape[:4]
    cols = np.ascontiguousarray(win.transpose(1, 4, 5, 0, 2, 3))       # C,KH,KW,N,OH,OW
    return cols.reshape(g, -1, n * oh * ow)


def _dy_by_group(dy, g):
    """dy [N,O,OH,OW] as a (groups, O/groups, N*OH*OW) array."""
    n, o, oh, ow = dy.shape
    return np.ascontiguousarray(dy.transpose(1, 0, 2, 3)).reshape(g, o // g, n * oh * ow)


# CUDA kernels (conv.cu): implicit GEMM per group when a group has at least THIN rows of
# output (channels), else the direct kernels, which waste nothing on thin groups.
THIN = 16


def _conv_dims(x_shape, w_shape, y_shape, attrs) -> tuple:
    """conv.cu's CONV_PARAMS: N, C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, G, dh, dw."""
    n, c, h, w = x_shape
    o, _, kh, kw = w_shape
    for extent in (n * y_shape[2] * y_shape[3], n * h * w, c * kh * kw, o * kh * kw):
        i32(extent)      # the kernels index the per-group products in 32 bits: OpError past that
    return tuple(i32(v) for v in (n, c, h, w, o, kh, kw, *y_shape[2:], *attrs["stride"], *attrs["padding"],
                                  attrs["groups"], *_dilation(attrs)))


def _phases_need_direct(attrs) -> bool:
    """The data gradient's stride phases (ConvPhase) take a dilation only along an axis of stride 1."""
    return any(s > 1 and d > 1 for s, d in zip(attrs["stride"], _dilation(attrs)))


def _stride_phases(x_shape, attrs) -> list[tuple[int, int, int]]:
    """(ah, aw, pixels) per stride phase of the data gradient (conv.cu's ConvPhase): the input
    pixels with (h + ph) % sh == ah and (w + pw) % sw == aw, phases without pixels left out."""
    n, _, h, w = x_shape
    (sh, sw), (ph, pw) = attrs["stride"], attrs["padding"]

    def count(size, stride, pad, a):
        first = (a - pad) % stride
        return -(-(size - first) // stride) if first < size else 0

    phases = [(ah, aw, n * count(h, sh, ph, ah) * count(w, sw, pw, aw)) for ah in range(sh) for aw in range(sw)]
    return [p for p in phases if p[2]]


def _grad_weight_split(x_shape, w_shape, y_shape, g):
    """(tiles, splits, k_chunk) of the weight gradient's per-group product Og x Cg*KH*KW over N*OH*OW."""
    o, cg, kh, kw = w_shape
    m, n, k = o // g, cg * kh * kw, x_shape[0] * y_shape[2] * y_shape[3]
    tiles = gemm_tiles(m, n, g)
    return (tiles, *split_k(tiles, m, n, k, g))


@register
class Conv2d(Op):
    """(x[N,C,H,W], w[O,C/groups,KH,KW]) -> y[N,O,OH,OW], OH = (H + 2*ph - KH)//sh + 1."""
    name, arity = "conv2d", 2
    cuda_kernels = ("conv2d_fwd_gemm", "conv2d_fwd_gemm_s", "conv2d_fwd_direct")

    def canon(self, attrs):
        return _canon_conv(attrs)

    def infer(self, attrs, ins):
        x, w = ins
        oh, ow = _out_hw(x.shape, w.shape, attrs)
        dtype = same_dtype(ins)
        require_float(dtype)
        return [((x.shape[0], w.shape[0], oh, ow), dtype)]

    def cost(self, attrs, ins, outs):
        return _conv_cost(ins[0].shape, ins[1].shape, attrs, ins, outs)

    def gradient(self, g, node, dys, wanted):
        x, w = node.inputs
        a = node.attrs
        dx = emit(g, "conv2d_grad_data", [w, dys[0]], input_hw=g.shape(x)[2:], **a) if wanted[0] else None
        dw = emit(g, "conv2d_grad_weight", [x, dys[0]], kernel_hw=g.shape(w)[2:], **a) if wanted[1] else None
        return [dx, dw]

    def cuda_launches(self, attrs, ins, outs):
        x, w, y = ins[0].shape, ins[1].shape, outs[0].shape
        g, dtype, dims = attrs["groups"], outs[0].dtype, _conv_dims(x, w, y, attrs)
        og, cols = w[0] // g, x[0] * y[2] * y[3]
        if og < THIN:
            return [grid_stride(kernel_name("conv2d_fwd_direct", dtype), numel(y), (OUT(0), IN(0), IN(1), *dims),
                                OUT(0))]
        return [gemm_launch("conv2d_fwd_gemm", dtype, gemm_tiles(og, cols, g), og, cols, g,
                            (OUT(0), IN(0), IN(1), *dims), OUT(0))]

    def compute(self, attrs, xs, ys):
        x, w = xs
        y = ys[0]
        n, o, oh, ow = y.shape
        g = attrs["groups"]
        out = np.matmul(w.reshape(g, o // g, -1), _columns(x, w.shape[2:], attrs))   # g, O/g, N*OH*OW
        np.copyto(y, out.reshape(o, n, oh, ow).transpose(1, 0, 2, 3))


@register
class Conv2dGradData(Op):
    """(w, dy) -> dx[N,C,H,W]; x itself is not needed, so it can be freed after the forward pass."""
    name, arity, differentiable = "conv2d_grad_data", 2, False
    cuda_kernels = ("conv2d_grad_data_gemm", "conv2d_grad_data_gemm_s", "conv2d_grad_data_direct")

    def canon(self, attrs):
        return _canon_conv(attrs, extra=("input_hw",))

    def infer(self, attrs, ins):
        w, dy = ins
        o, cg = _four_d(w.shape, "w [O,C/groups,KH,KW]")[:2]
        n = _four_d(dy.shape, "dy [N,O,OH,OW]")[0]
        x_shape = (n, cg * attrs["groups"], *attrs["input_hw"])
        expect = (n, o, *_out_hw(x_shape, w.shape, attrs))
        if tuple(dy.shape) != expect:
            raise ShapeError(f"dy {tuple(dy.shape)} does not match input {x_shape} and w {tuple(w.shape)}: "
                             f"expected {expect}")
        dtype = same_dtype(ins)
        require_float(dtype)
        return [(x_shape, dtype)]

    def cost(self, attrs, ins, outs):
        return _conv_cost(outs[0].shape, ins[0].shape, attrs, ins, outs)

    def cuda_launches(self, attrs, ins, outs):
        w, dy, x = ins[0].shape, ins[1].shape, outs[0].shape
        g, dtype, dims = attrs["groups"], outs[0].dtype, _conv_dims(x, w, dy, attrs)
        cg = w[1]
        if cg < THIN or _phases_need_direct(attrs):
            return [grid_stride(kernel_name("conv2d_grad_data_direct", dtype), numel(x),
                                (OUT(0), IN(0), IN(1), *dims), OUT(0))]
        phases = _stride_phases(x, attrs)
        return [gemm_launch("conv2d_grad_data_gemm", dtype, gemm_tiles(cg, cols, g), cg, cols, g,
                            (OUT(0), IN(0), IN(1), *dims, i32(ah), i32(aw)), OUT(0), piece=len(phases) > 1)
                for ah, aw, cols in phases]

    def compute(self, attrs, xs, ys):
        w, dy = xs
        dx = ys[0]
        o, cg, kh, kw = w.shape
        n, c, h, wd = dx.shape
        oh, ow = dy.shape[2:]
        g, (sh, sw), (ph, pw), (dh, dw) = attrs["groups"], attrs["stride"], attrs["padding"], _dilation(attrs)
        wt, dyg = w.reshape(g, o // g, -1).transpose(0, 2, 1), _dy_by_group(dy, g)
        # One output channel per group (depthwise) makes this an outer product, which
        # broadcasting does several times faster than a matmul with inner dimension 1.
        dcols = (wt * dyg if o == g else np.matmul(wt, dyg)).reshape(c, kh, kw, n, oh, ow)
        dxp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw), dtype=dx.dtype)
        for i in range(kh):            # fixed order: deterministic sums
            for j in range(kw):
                r, s = i * dh, j * dw
                dxp[:, :, r:r + sh * oh:sh, s:s + sw * ow:sw] += dcols[:, i, j].transpose(1, 0, 2, 3)
        np.copyto(dx, dxp[:, :, ph:ph + h, pw:pw + wd])


@register
class Conv2dGradWeight(Op):
    """(x, dy) -> dw[O,C/groups,KH,KW]."""
    name, arity, differentiable = "conv2d_grad_weight", 2, False
    cuda_kernels = ("conv2d_grad_weight_gemm", "conv2d_grad_weight_gemm_s", "conv2d_splitk_reduce",
                    "conv2d_grad_weight_direct")

    def canon(self, attrs):
        return _canon_conv(attrs, extra=("kernel_hw",))

    def infer(self, attrs, ins):
        x, dy = ins
        n, c = _four_d(x.shape, "x [N,C,H,W]")[:2]
        o = _four_d(dy.shape, "dy [N,O,OH,OW]")[1]
        g = attrs["groups"]
        w_shape = (o, c // g, *attrs["kernel_hw"])
        expect = (n, o, *_out_hw(x.shape, w_shape, attrs))
        if tuple(dy.shape) != expect:
            raise ShapeError(f"dy {tuple(dy.shape)} does not match x {tuple(x.shape)} and kernel "
                             f"{attrs['kernel_hw']}: expected {expect}")
        dtype = same_dtype(ins)
        require_float(dtype)
        return [(w_shape, dtype)]

    def cost(self, attrs, ins, outs):
        return _conv_cost(ins[0].shape, outs[0].shape, attrs, ins, outs)

    def cuda_workspaces(self, attrs, ins, outs):
        x, dy, w = ins[0].shape, ins[1].shape, outs[0].shape
        if w[0] // attrs["groups"] < THIN:
            return ()
        _, splits, _ = _grad_weight_split(x, w, dy, attrs["groups"])
        return (splits * numel(w) * outs[0].dtype.itemsize,) if splits > 1 else ()

    def cuda_launches(self, attrs, ins, outs):
        """Per group, dw = dy . cols(x)^T over k = N*OH*OW, split over k into scratch when dw
        has few tiles (the splits then added in order); thin groups: one block per weight."""
        x, dy, w = ins[0].shape, ins[1].shape, outs[0].shape
        g, dtype, dims = attrs["groups"], outs[0].dtype, _conv_dims(x, w, dy, attrs)
        if w[0] // g < THIN:
            return [per_block(kernel_name("conv2d_grad_weight_direct", dtype), numel(w),
                              (OUT(0), IN(0), IN(1), *dims), OUT(0))]
        tiles, splits, chunk = _grad_weight_split(x, w, dy, g)
        og, cols, dst = w[0] // g, w[1] * w[2] * w[3], WS(0) if splits > 1 else OUT(0)
        launches = [gemm_launch("conv2d_grad_weight_gemm", dtype, tiles, og, cols, g * splits,
                                (dst, IN(0), IN(1), *dims, i32(chunk)), dst)]
        if splits > 1:
            launches.append(grid_stride(kernel_name("conv2d_splitk_reduce", dtype), numel(w),
                                        (OUT(0), WS(0), i64(numel(w)), i32(splits)), OUT(0)))
        return launches

    def compute(self, attrs, xs, ys):
        x, dy = xs
        dw = ys[0]
        g = attrs["groups"]
        cols = _columns(x, dw.shape[2:], attrs)
        np.copyto(dw, np.matmul(_dy_by_group(dy, g), cols.transpose(0, 2, 1)).reshape(dw.shape))


def _swap_inputs(launches):
    """The data gradient's launches, (w, dy) read as a transposed convolution's (x, w)."""
    swap = {IN(0): IN(1), IN(1): IN(0)}
    return [replace(l, args=tuple(swap.get(a, a) if isinstance(a, tuple) else a for a in l.args))
            for l in launches]


@register
class ConvTranspose2d(Op):
    """(x[N,Cin,H,W], w[Cin,Cout/groups,KH,KW]) -> y[N,Cout,OH,OW], PyTorch's ConvTranspose2d
    without bias: OH = (H-1)*sh - 2*ph + dh*(KH-1) + oph + 1. It is conv2d's data gradient with
    x as dy (the same numpy and CUDA kernels); its own gradients are conv2d (for x) and
    conv2d_grad_weight with the roles of x and dy swapped (for w)."""
    name, arity = "conv_transpose2d", 2
    cuda_kernels = Conv2dGradData.cuda_kernels      # its forward pass is that operator

    def canon(self, attrs):
        a = _canon_conv(attrs, optional=("output_padding",))
        limit = [max(s, d) for s, d in zip(a["stride"], _dilation(a))]
        if any(not 0 <= o < m for o, m in zip(a["output_padding"], limit)):
            raise OpError(f"output_padding {a['output_padding']} must be >= 0 and smaller than stride or "
                          f"dilation ({tuple(limit)})")
        return a

    def _as_grad_data(self, attrs, x_shape, w_shape) -> dict:
        """conv2d_grad_data's attributes: the convolution whose input is this one's output."""
        n, cin, h, wd = _four_d(x_shape, "x [N,Cin,H,W]")
        _, _, kh, kw = _four_d(w_shape, "w [Cin,Cout/groups,KH,KW]")
        span = _span((kh, kw), attrs)
        out_hw = tuple((i - 1) * s - 2 * p + k + o for i, s, p, k, o in
                       zip((h, wd), attrs["stride"], attrs["padding"], span, attrs["output_padding"]))
        if min(out_hw) < 1:
            raise ShapeError(f"conv_transpose2d of x {tuple(x_shape)} with w {tuple(w_shape)} and {attrs} "
                             f"has an empty output {out_hw}")
        conv_attrs = {k: v for k, v in attrs.items() if k != "output_padding"}
        return {**conv_attrs, "input_hw": out_hw}

    def infer(self, attrs, ins):
        x, w = ins
        if _four_d(w.shape, "w [Cin,Cout/groups,KH,KW]")[0] != _four_d(x.shape, "x [N,Cin,H,W]")[1]:
            raise ShapeError(f"w {tuple(w.shape)} must have x's {x.shape[1]} input channels first "
                             f"(PyTorch's [Cin, Cout/groups, KH, KW]) for x {tuple(x.shape)}")
        grad_data = _GRAD_DATA.canon(self._as_grad_data(attrs, x.shape, w.shape))
        return _GRAD_DATA.infer(grad_data, [w, x])

    def cost(self, attrs, ins, outs):
        return _conv_cost(outs[0].shape, ins[1].shape, attrs, ins, outs)

    def gradient(self, g, node, dys, wanted):
        x, w = node.inputs
        conv_attrs = {k: v for k, v in node.attrs.items() if k != "output_padding"}
        dx = emit(g, "conv2d", [dys[0], w], **conv_attrs) if wanted[0] else None
        dw = emit(g, "conv2d_grad_weight", [dys[0], x], kernel_hw=g.shape(w)[2:], **conv_attrs) if wanted[1] else None
        return [dx, dw]

    def cuda_launches(self, attrs, ins, outs):
        x, w = ins
        grad_data = _GRAD_DATA.canon(self._as_grad_data(attrs, x.shape, w.shape))
        return _swap_inputs(_GRAD_DATA.cuda_launches(grad_data, [w, x], outs))

    def compute(self, attrs, xs, ys):
        x, w = xs
        _GRAD_DATA.compute(_GRAD_DATA.canon(self._as_grad_data(attrs, x.shape, w.shape)), [w, x], ys)


_GRAD_DATA = Conv2dGradData()
