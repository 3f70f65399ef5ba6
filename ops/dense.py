"""Fully connected layer, y = x @ w.T (+ b), and its gradients."""
from __future__ import annotations

import numpy as np

from .cuda_launch import IN, OUT, WS, gemm_launch, gemm_tiles, grid_stride, i32, i64, kernel_name, split_k
from .registry import (Cost, Op, OpError, ShapeError, check_attrs, emit, nbytes, numel, register, require_float,
                       same_dtype)


def _matrix(t, what: str) -> tuple[int, int]:
    shape = tuple(t.shape)
    if len(shape) != 2:
        raise ShapeError(f"{what} must be 2-D, got shape {shape}")
    return shape


def _gemm_cost(flops: float, ins, outs) -> Cost:
    return Cost(float(flops), float(sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs)))


def _gemm(base, dtype, c, a, b, m, n, k, bias=None, splits=1, k_chunk=None):
    """Launch of dense.cu's gemm_<base>: C (m x n) from A, B over k, optionally + bias[n]."""
    tiles = gemm_tiles(m, n)
    args = (c, a, b, bias if bias is not None else a, i32(m), i32(n), i32(k), i32(bias is not None),
            i32(k if k_chunk is None else k_chunk))
    return gemm_launch(base, dtype, tiles, m, n, splits, args, c)


class _SplitGemm:
    """An operator whose product (``_product``: m x n over k) is split over k into scratch when
    it has too few tiles to fill the GPU and k is long (then gemm_splitk_reduce adds the splits)."""

    @classmethod
    def _split(cls, ins) -> tuple[int, int]:
        m, n, k = cls._product(ins)
        return split_k(gemm_tiles(m, n), m, n, k)

    def cuda_workspaces(self, attrs, ins, outs):
        splits, out = self._split(ins)[0], outs[0]
        return (splits * numel(out.shape) * out.dtype.itemsize,) if splits > 1 else ()


def _splitk_reduce(dtype, total: int, splits: int, bias=None, bias_period: int = 1):
    """OUT(0)[i] = the splits' partial products in WS(0) added in split order (+ bias[i % period])."""
    return grid_stride(kernel_name("gemm_splitk_reduce", dtype), total,
                       (OUT(0), WS(0), bias if bias is not None else WS(0), i64(total), i32(splits),
                        i32(bias_period), i32(bias is not None)), OUT(0))


@register
class FullyConnected(_SplitGemm, Op):
    """(x[N,K], w[M,K]) or (x, w, b[M]) -> y[N,M]; w is stored [out, in] as in MXNet."""
    name, arity = "fully_connected", None
    cuda_kernels = ("gemm_nt", "gemm_nt_s", "gemm_splitk_reduce")

    def infer(self, attrs, ins):
        if len(ins) not in (2, 3):
            raise OpError(f"takes (x, w) or (x, w, b), got {len(ins)} inputs")
        n, k = _matrix(ins[0], "x")
        m, kw = _matrix(ins[1], "w")
        if kw != k:
            raise ShapeError(f"x is {(n, k)} and w is {(m, kw)}: w must be [M, {k}] to match x's K={k}")
        if len(ins) == 3 and tuple(ins[2].shape) != (m,):
            raise ShapeError(f"b must have shape ({m},) for w of shape {(m, kw)}, got {tuple(ins[2].shape)}")
        dtype = same_dtype(ins)
        require_float(dtype)
        return [((n, m), dtype)]

    def cost(self, attrs, ins, outs):
        (n, k), m = ins[0].shape, ins[1].shape[0]
        return _gemm_cost(2 * n * m * k + (n * m if len(ins) == 3 else 0), ins, outs)

    def gradient(self, g, node, dys, wanted):
        dy = dys[0]
        grads = [None] * len(node.inputs)
        if dy is None:
            return grads
        x, w = node.inputs[:2]
        if wanted[0]:
            grads[0] = emit(g, "fully_connected_grad_data", [w, dy])
        has_bias = len(node.inputs) == 3 and wanted[2]
        if wanted[1] or has_bias:
            dparams = g.apply("fully_connected_grad_weight", [x, dy], has_bias=has_bias)
            if wanted[1]:
                grads[1] = dparams[0]
            if has_bias:
                grads[2] = dparams[1]
        return grads

    @staticmethod
    def _product(ins):
        (n, k), m = ins[0].shape, ins[1].shape[0]
        return n, m, k

    def cuda_launches(self, attrs, ins, outs):
        """y[N,M] = x[N,K] @ w[M,K]^T (+ b), the bias added after the full sum as in numpy; split
        over K into scratch when y has too few tiles to fill the GPU and K is long."""
        (n, k), m = ins[0].shape, ins[1].shape[0]
        bias = IN(2) if len(ins) == 3 else None
        splits, chunk = self._split(ins)
        if splits == 1:
            return [_gemm("gemm_nt", outs[0].dtype, OUT(0), IN(0), IN(1), n, m, k, bias)]
        return [_gemm("gemm_nt", outs[0].dtype, WS(0), IN(0), IN(1), n, m, k, splits=splits, k_chunk=chunk),
                _splitk_reduce(outs[0].dtype, n * m, splits, bias, m)]

    def compute(self, attrs, xs, ys):
        y = ys[0]
        np.matmul(xs[0], xs[1].T, out=y)
        if len(xs) == 3:
            y += xs[2]


@register
class FullyConnectedGradData(_SplitGemm, Op):
    """(w[M,K], dy[N,M]) -> dx[N,K] = dy @ w."""
    name, arity, differentiable = "fully_connected_grad_data", 2, False
    cuda_kernels = ("gemm_nn", "gemm_nn_s", "gemm_splitk_reduce")

    def infer(self, attrs, ins):
        m, k = _matrix(ins[0], "w")
        n, mdy = _matrix(ins[1], "dy")
        if mdy != m:
            raise ShapeError(f"dy is {(n, mdy)} and w is {(m, k)}: dy must be [N, {m}]")
        return [((n, k), same_dtype(ins))]

    def cost(self, attrs, ins, outs):
        (m, k), n = ins[0].shape, ins[1].shape[0]
        return _gemm_cost(2 * n * m * k, ins, outs)

    @staticmethod
    def _product(ins):
        (m, k), n = ins[0].shape, ins[1].shape[0]
        return n, k, m

    def cuda_launches(self, attrs, ins, outs):
        """dx[N,K] = dy[N,M] @ w[M,K], split over M into scratch when dx has too few tiles to fill
        the GPU and M is long (an LSTM's input gradient: a few rows, thousands of gates)."""
        (m, k), n = ins[0].shape, ins[1].shape[0]
        splits, chunk = self._split(ins)
        if splits == 1:
            return [_gemm("gemm_nn", outs[0].dtype, OUT(0), IN(1), IN(0), n, k, m)]
        return [_gemm("gemm_nn", outs[0].dtype, WS(0), IN(1), IN(0), n, k, m, splits=splits, k_chunk=chunk),
                _splitk_reduce(outs[0].dtype, n * k, splits)]

    def compute(self, attrs, xs, ys):
        w, dy = xs
        np.matmul(dy, w, out=ys[0])


@register
class FullyConnectedGradWeight(_SplitGemm, Op):
    """(x[N,K], dy[N,M]) -> dw[M,K] = dy.T @ x, and db[M] = sum of dy's rows when has_bias."""
    name, arity, differentiable = "fully_connected_grad_weight", 2, False
    cuda_kernels = ("gemm_tn", "gemm_tn_s", "gemm_splitk_reduce", "sum_rows")

    def canon(self, attrs):
        a = check_attrs(attrs, {"has_bias": False})
        if not isinstance(a["has_bias"], (bool, np.bool_)):
            raise OpError(f"has_bias must be a bool, got {a['has_bias']!r}")
        return {"has_bias": bool(a["has_bias"])}

    def infer(self, attrs, ins):
        n, k = _matrix(ins[0], "x")
        ndy, m = _matrix(ins[1], "dy")
        if ndy != n:
            raise ShapeError(f"x is {(n, k)} and dy is {(ndy, m)}: they must have the same N")
        dtype = same_dtype(ins)
        return [((m, k), dtype)] + ([((m,), dtype)] if attrs["has_bias"] else [])

    def cost(self, attrs, ins, outs):
        (n, k), m = ins[0].shape, ins[1].shape[1]
        return _gemm_cost(2 * n * m * k + (n * m if attrs["has_bias"] else 0), ins, outs)

    @staticmethod
    def _product(ins):
        (n, k), m = ins[0].shape, ins[1].shape[1]
        return m, k, n

    def cuda_launches(self, attrs, ins, outs):
        """dw[M,K] = dy[N,M]^T @ x[N,K], split over N into scratch when dw has few tiles and N
        is long (then gemm_splitk_reduce adds the splits in order); db = dy's column sums."""
        (n, k), m = ins[0].shape, ins[1].shape[1]
        dtype = outs[0].dtype
        splits, chunk = self._split(ins)
        dst = WS(0) if splits > 1 else OUT(0)
        launches = [_gemm("gemm_tn", dtype, dst, IN(1), IN(0), m, k, n, splits=splits, k_chunk=chunk)]
        if splits > 1:
            launches.append(_splitk_reduce(dtype, m * k, splits))
        if attrs["has_bias"]:
            launches.append(grid_stride(kernel_name("sum_rows", dtype), m, (OUT(1), IN(1), i32(n), i32(m)), OUT(1),
                                        per_thread=1))
        return launches

    def compute(self, attrs, xs, ys):
        x, dy = xs
        np.matmul(dy.T, x, out=ys[0])
        if attrs["has_bias"]:
            np.sum(dy, axis=0, out=ys[1])
