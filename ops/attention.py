"""Attention's operators: batched matrix products with transposes, softmax over the last axis
(optionally scaled and causally masked) and its gradient, and axis permutation (heads).

Scores are ``batch_matmul(q, k, transpose_b=True)``, probabilities ``softmax(scores,
scale=1/sqrt(d), causal=True)`` (the scale folded in, so no scaled copy of the
[B, H, T, T] scores is ever stored), the context ``batch_matmul(probs, v)``."""
from __future__ import annotations

import numpy as np

from .cuda_launch import (IN, OUT, gemm_launch, gemm_tiles, grid_stride, i32, i64, kernel_name, per_block,
                          scalar)
from .registry import Cost, Op, OpError, ShapeError, check_attrs, emit, nbytes, numel, register, require_float, \
    same_dtype

MAX_TRANSPOSE_DIMS = 4     # the permute kernel's coordinates are four ints


def _flag(a: dict, key: str) -> bool:
    if not isinstance(a[key], (bool, np.bool_)):
        raise OpError(f"{key} must be a bool, got {a[key]!r}")
    return bool(a[key])


def _matrices(t, what: str, transposed: bool) -> tuple[tuple[int, ...], int, int]:
    """(batch dims, rows, cols) of ``t`` as used: [..., R, C], read transposed when asked."""
    shape = tuple(t.shape)
    if len(shape) < 2:
        raise ShapeError(f"{what} must have at least 2 dimensions [..., rows, cols], got shape {shape}")
    r, c = shape[-2:]
    return shape[:-2], (c if transposed else r), (r if transposed else c)


def _bmm_dims(attrs, ins) -> tuple[tuple[int, ...], int, int, int]:
    """(batch dims, M, N, K) of C[..., M, N] = op(A)[..., M, K] @ op(B)[..., K, N]."""
    batch_a, m, k = _matrices(ins[0], "a", attrs["transpose_a"])
    batch_b, kb, n = _matrices(ins[1], "b", attrs["transpose_b"])
    if batch_a != batch_b:
        raise ShapeError(f"a {tuple(ins[0].shape)} and b {tuple(ins[1].shape)} must have the same batch "
                         f"dimensions (no broadcasting), got {batch_a} and {batch_b}")
    if k != kb:
        raise ShapeError(f"a {tuple(ins[0].shape)} and b {tuple(ins[1].shape)} do not multiply: a gives "
                         f"K={k} and b K={kb} (transpose_a={attrs['transpose_a']}, "
                         f"transpose_b={attrs['transpose_b']})")
    return batch_a, m, n, k


@register
class BatchMatmul(Op):
    """(a, b) -> c[..., M, N] = op(a) @ op(b) for every batch index, op the transpose of the
    last two axes when ``transpose_a`` / ``transpose_b``."""
    name, arity = "batch_matmul", 2
    cuda_kernels = tuple(f"bmm_{v}{s}" for v in ("nn", "nt", "tn", "tt") for s in ("", "_s"))

    def canon(self, attrs):
        a = check_attrs(attrs, {"transpose_a": False, "transpose_b": False})
        return {"transpose_a": _flag(a, "transpose_a"), "transpose_b": _flag(a, "transpose_b")}

    def infer(self, attrs, ins):
        batch, m, n, _ = _bmm_dims(attrs, ins)
        dtype = same_dtype(ins)
        require_float(dtype)
        return [(batch + (m, n), dtype)]

    def cost(self, attrs, ins, outs):
        batch, m, n, k = _bmm_dims(attrs, ins)
        return Cost(2.0 * numel(batch) * m * n * k, float(sum(nbytes(t) for t in ins) + nbytes(outs[0])))

    def gradient(self, g, node, dys, wanted):
        dc = dys[0]
        if dc is None:
            return [None, None]
        a, b = node.inputs
        ta, tb = node.attrs["transpose_a"], node.attrs["transpose_b"]
        # C = op(A) op(B): d op(A) = dC op(B)^T and d op(B) = op(A)^T dC, each written as one
        # product whose result is already in A's (B's) stored layout.
        if not ta:
            da = (dc, b, False, not tb)                  # dA = dC @ op(B)^T
        else:
            da = (b, dc, tb, True)                       # dA = op(B) @ dC^T
        if not tb:
            db = (a, dc, not ta, False)                  # dB = op(A)^T @ dC
        else:
            db = (dc, a, True, ta)                       # dB = dC^T @ op(A)
        out = []
        for want, (x, y, tx, ty) in zip(wanted, (da, db)):
            out.append(emit(g, "batch_matmul", [x, y], transpose_a=tx, transpose_b=ty) if want else None)
        return out

    def cuda_launches(self, attrs, ins, outs):
        """One tiled GEMM per batch index (grid z), read through the transposes in place."""
        batch, m, n, k = _bmm_dims(attrs, ins)
        z = numel(batch)
        variant = ("t" if attrs["transpose_a"] else "n") + ("t" if attrs["transpose_b"] else "n")
        tiles = gemm_tiles(m, n, z)
        return [gemm_launch(f"bmm_{variant}", outs[0].dtype, tiles, m, n, z,
                            (OUT(0), IN(0), IN(1), i32(m), i32(n), i32(k)), OUT(0))]

    def compute(self, attrs, xs, ys):
        a = np.swapaxes(xs[0], -1, -2) if attrs["transpose_a"] else xs[0]
        b = np.swapaxes(xs[1], -1, -2) if attrs["transpose_b"] else xs[1]
        np.matmul(a, b, out=ys[0])


def _softmax_attrs(attrs) -> dict:
    a = check_attrs(attrs, {"scale": 1.0, "causal": False})
    try:
        scale = float(a["scale"])
    except (TypeError, ValueError):
        raise OpError(f"scale must be a number, got {a['scale']!r}") from None
    if not np.isfinite(scale) or scale == 0:
        raise OpError(f"scale must be finite and non-zero, got {a['scale']!r}")
    return {"scale": scale, "causal": _flag(a, "causal")}


def _check_rows(t, attrs, what: str) -> tuple[int, ...]:
    shape = tuple(t.shape)
    if not shape or shape[-1] == 0:
        raise ShapeError(f"{what} needs a non-empty last axis, got shape {shape}")
    if attrs["causal"] and (len(shape) < 2 or shape[-2] != shape[-1]):
        raise ShapeError(f"a causal softmax needs square [..., T, T] scores (query, key), got shape {shape}")
    require_float(t.dtype)
    return shape


def _causal_mask(shape) -> np.ndarray:
    """True where key j lies after query i (j > i): those scores take no probability."""
    t = shape[-1]
    return np.triu(np.ones((t, t), bool), k=1)


def _softmax_launch(base: str, dtype, shape, attrs, args) -> object:
    cols = shape[-1]
    rows = numel(shape) // cols
    query_len = shape[-2] if attrs["causal"] else 0       # 0: no mask
    return per_block(kernel_name(base, dtype), rows,
                     (*args, scalar(dtype, attrs["scale"]), i64(rows), i32(cols), i32(query_len)),
                     OUT(0), elements_per_item=cols)


@register
class Softmax(Op):
    """x -> y = softmax(scale * x) over the last axis; with ``causal``, x is [..., T, T] and
    query i gives key j > i no probability. Stable: each row's maximum is subtracted first."""
    name = "softmax"
    cuda_kernels = ("softmax_fwd",)

    def canon(self, attrs):
        return _softmax_attrs(attrs)

    def infer(self, attrs, ins):
        return [(_check_rows(ins[0], attrs, "softmax"), np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        return Cost(5.0 * numel(ins[0].shape), float(nbytes(ins[0]) + nbytes(outs[0])))

    def gradient(self, g, node, dys, wanted):
        if dys[0] is None:
            return [None]
        return [emit(g, "softmax_grad", [node.outputs[0], dys[0]], **node.attrs)]

    def cuda_launches(self, attrs, ins, outs):
        """One block per row: maximum, sum of exponentials, probabilities."""
        return [_softmax_launch("softmax_fwd", outs[0].dtype, tuple(ins[0].shape), attrs, (OUT(0), IN(0)))]

    def compute(self, attrs, xs, ys):
        x, y = xs[0], ys[0]
        t = x.dtype.type
        np.multiply(x, t(attrs["scale"]), out=y)
        if attrs["causal"]:
            y[..., _causal_mask(x.shape)] = -np.inf
        y -= y.max(axis=-1, keepdims=True)
        np.exp(y, out=y)
        y /= np.sum(y, axis=-1, keepdims=True)


@register
class SoftmaxGrad(Op):
    """(y, dy) -> dx = scale * y * (dy - sum(dy * y)) over the last axis (masked entries have
    y = 0, so they get no gradient)."""
    name, arity, differentiable = "softmax_grad", 2, False
    cuda_kernels = ("softmax_bwd",)

    def canon(self, attrs):
        return _softmax_attrs(attrs)

    def infer(self, attrs, ins):
        shape = _check_rows(ins[0], attrs, "softmax_grad")
        if tuple(ins[1].shape) != shape:
            raise ShapeError(f"dy has shape {tuple(ins[1].shape)}, y has {shape}; they must match")
        return [(shape, same_dtype(ins))]

    def cost(self, attrs, ins, outs):
        return Cost(4.0 * numel(ins[0].shape), float(sum(nbytes(t) for t in ins) + nbytes(outs[0])))

    def cuda_launches(self, attrs, ins, outs):
        return [_softmax_launch("softmax_bwd", outs[0].dtype, tuple(ins[0].shape), attrs,
                                (OUT(0), IN(0), IN(1)))]

    def compute(self, attrs, xs, ys):
        y, dy = xs
        t = y.dtype.type
        inner = np.sum(dy * y, axis=-1, keepdims=True)
        np.multiply(y, dy - inner, out=ys[0])
        ys[0] *= t(attrs["scale"])


def _axes(value, ndim: int) -> tuple[int, ...]:
    try:
        axes = tuple(int(a) for a in value)
    except TypeError:
        raise OpError(f"axes must be a sequence of ints, got {value!r}") from None
    if sorted(axes) != list(range(ndim)):
        raise ShapeError(f"axes {axes} is not a permutation of the {ndim} axes 0..{ndim - 1}")
    return axes


@register
class Transpose(Op):
    """x -> y = x.transpose(axes): y's axis i is x's axis axes[i] (heads: (0, 2, 1, 3))."""
    name = "transpose"
    cuda_kernels = ("permute4",)

    def canon(self, attrs):
        a = check_attrs(attrs, {"axes": None}, required=["axes"])
        try:
            return {"axes": tuple(int(v) for v in a["axes"])}
        except TypeError:
            raise OpError(f"axes must be a sequence of ints, got {a['axes']!r}") from None

    def infer(self, attrs, ins):
        shape = tuple(ins[0].shape)
        axes = _axes(attrs["axes"], len(shape))
        return [(tuple(shape[a] for a in axes), np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        return Cost(0.0, float(nbytes(ins[0]) + nbytes(outs[0])))

    def gradient(self, g, node, dys, wanted):
        if dys[0] is None:
            return [None]
        inverse = tuple(int(i) for i in np.argsort(node.attrs["axes"]))
        return [emit(g, "transpose", [dys[0]], axes=inverse)]

    def cuda_launches(self, attrs, ins, outs):
        """y's four (padded) coordinates, x's stride along each: a gather, one thread per y element."""
        shape = tuple(ins[0].shape)
        if len(shape) > MAX_TRANSPOSE_DIMS:
            raise OpError(f"transpose's CUDA kernel handles at most {MAX_TRANSPOSE_DIMS} dimensions, "
                          f"got shape {shape}")
        strides = [numel(shape[i + 1:]) for i in range(len(shape))]
        pad = MAX_TRANSPOSE_DIMS - len(shape)
        dims = [1] * pad + [shape[a] for a in attrs["axes"]]
        src = [0] * pad + [strides[a] for a in attrs["axes"]]
        n = numel(shape)
        return [grid_stride(kernel_name("permute4", outs[0].dtype), n,
                            (OUT(0), IN(0), *(i32(d) for d in dims), *(i64(s) for s in src), i64(n)), OUT(0))]

    def compute(self, attrs, xs, ys):
        np.copyto(ys[0], xs[0].transpose(attrs["axes"]))
