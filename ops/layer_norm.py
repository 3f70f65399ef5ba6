"""Layer normalization and RMS normalization over the last axis, and their gradients.

Each row of D values is normalized with its own statistics (no running state, unlike batch
norm). Layer norm: y = (x - mean) * invstd * gamma + beta, invstd = 1/sqrt(var + eps)
(biased variance). RMS norm (Llama's): y = x * invrms * gamma, invrms = 1/sqrt(mean(x^2) +
eps), with a scale and no shift. The per-row statistics are saved for the gradient, whose
per-column sums (dgamma, dbeta) add the rows in order."""
from __future__ import annotations

import numpy as np

from .cuda_launch import IN, OUT, grid_stride, i32, i64, kernel_name, per_row, scalar
from .registry import (Cost, Op, OpError, ShapeError, nbytes, numel, positive_eps, register, require_float,
                       same_dtype)


def _rows(x, vectors, what: str) -> tuple[int, ...]:
    """x's shape, checked with the [D] vectors (gamma, beta) that scale its last axis."""
    shape = tuple(x.shape)
    if not shape or shape[-1] == 0:
        raise ShapeError(f"{what}: x needs a non-empty last axis to normalize, got shape {shape}")
    require_float(x.dtype)
    d = shape[-1]
    for name, t in vectors:
        if tuple(t.shape) != (d,):
            raise ShapeError(f"{what}: {name} must have shape ({d},) for x of shape {shape}, got {tuple(t.shape)}")
    return shape


def _check_stats(shape, stats, what: str) -> None:
    for name, t in stats:
        if tuple(t.shape) != shape[:-1]:
            raise ShapeError(f"{what}: {name} must have shape {shape[:-1]} (one per row of x {shape}), "
                             f"got {tuple(t.shape)}")


def _column_launch(base: str, dtype, shape, args) -> object:
    d = shape[-1]
    return grid_stride(kernel_name(base, dtype), d, (*args, i64(numel(shape) // d), i32(d)), OUT(1), per_thread=1)


def _moved(ins, outs) -> float:
    return float(sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs))


@register
class LayerNorm(Op):
    """(x[..., D], gamma[D], beta[D]) -> (y, mean[...], invstd[...])."""
    name, arity = "layer_norm", 3
    cuda_kernels = ("layer_norm_fwd",)

    def canon(self, attrs):
        return positive_eps(attrs)

    def infer(self, attrs, ins):
        shape = _rows(ins[0], (("gamma", ins[1]), ("beta", ins[2])), "layer_norm")
        dtype = same_dtype(ins)
        return [(shape, dtype), (shape[:-1], dtype), (shape[:-1], dtype)]

    def cost(self, attrs, ins, outs):
        return Cost(8.0 * numel(ins[0].shape), _moved(ins, outs) + nbytes(ins[0]))

    def gradient(self, g, node, dys, wanted):
        if any(d is not None for d in dys[1:]):
            raise OpError("only output 0 (y) of layer_norm is differentiable; its statistics are not")
        if dys[0] is None:
            return [None] * 3
        x, gamma, _ = node.inputs
        _, mean, invstd = node.outputs
        dx, dgamma, dbeta = g.apply("layer_norm_grad", [x, gamma, mean, invstd, dys[0]])
        return [grad if w else None for grad, w in zip((dx, dgamma, dbeta), wanted)]

    def cuda_launches(self, attrs, ins, outs):
        """One block per row: the mean, the squared deviations' sum, then y."""
        return [per_row("layer_norm_fwd", outs[0].dtype, tuple(ins[0].shape),
                            (OUT(0), OUT(1), OUT(2), IN(0), IN(1), IN(2), scalar(outs[0].dtype, attrs["eps"])))]

    def compute(self, attrs, xs, ys):
        x, gamma, beta = xs
        y, mean, invstd = ys
        t = x.dtype.type
        d = t(x.shape[-1])
        np.divide(np.sum(x, axis=-1), d, out=mean)
        centered = x - mean[..., None]
        var = np.sum(centered * centered, axis=-1) / d
        np.divide(t(1), np.sqrt(var + t(attrs["eps"])), out=invstd)
        np.multiply(centered * invstd[..., None], gamma, out=y)
        y += beta


@register
class LayerNormGrad(Op):
    """(x, gamma, mean, invstd, dy) -> (dx, dgamma, dbeta); with xhat = (x - mean) * invstd and
    g = dy * gamma: dx = invstd / D * (D * g - sum(g) - xhat * sum(g * xhat)) per row,
    dgamma = sum over rows of dy * xhat, dbeta = sum over rows of dy."""
    name, arity, differentiable = "layer_norm_grad", 5, False
    cuda_kernels = ("layer_norm_bwd_data", "layer_norm_bwd_params")

    def infer(self, attrs, ins):
        x, gamma, mean, invstd, dy = ins
        shape = _rows(x, (("gamma", gamma),), "layer_norm_grad")
        _check_stats(shape, (("mean", mean), ("invstd", invstd)), "layer_norm_grad")
        if tuple(dy.shape) != shape:
            raise ShapeError(f"layer_norm_grad: dy has shape {tuple(dy.shape)}, x has {shape}; they must match")
        dtype = same_dtype(ins)
        d = shape[-1]
        return [(shape, dtype), ((d,), dtype), ((d,), dtype)]

    def cost(self, attrs, ins, outs):
        return Cost(12.0 * numel(ins[0].shape), _moved(ins, outs) + 2 * nbytes(ins[0]))

    def cuda_launches(self, attrs, ins, outs):
        """dx one block per row; dgamma and dbeta one thread per column, rows added in order."""
        dtype, shape = outs[0].dtype, tuple(ins[0].shape)
        return [per_row("layer_norm_bwd_data", dtype, shape, (OUT(0), IN(0), IN(1), IN(2), IN(3), IN(4))),
                _column_launch("layer_norm_bwd_params", dtype, shape, (OUT(1), OUT(2), IN(0), IN(2), IN(3), IN(4)))]

    def compute(self, attrs, xs, ys):
        x, gamma, mean, invstd, dy = xs
        dx, dgamma, dbeta = ys
        t = x.dtype.type
        d = t(x.shape[-1])
        xhat = (x - mean[..., None]) * invstd[..., None]
        g = dy * gamma
        inner = d * g - np.sum(g, axis=-1, keepdims=True) - xhat * np.sum(g * xhat, axis=-1, keepdims=True)
        np.multiply(inner, (invstd / d)[..., None], out=dx)
        rows_dy, rows_xhat = dy.reshape(-1, x.shape[-1]), xhat.reshape(-1, x.shape[-1])
        _sum_rows_in_order(rows_dy * rows_xhat, dgamma)
        _sum_rows_in_order(rows_dy, dbeta)


def _sum_rows_in_order(m: np.ndarray, out: np.ndarray) -> None:
    """out = m[0] + m[1] + ... left to right, as the column kernels add (np.sum may pair them)."""
    out[...] = m[0]
    for row in m[1:]:
        out += row


@register
class RmsNorm(Op):
    """(x[..., D], gamma[D]) -> (y, invrms[...]), y = (x * invrms) * gamma."""
    name, arity = "rms_norm", 2
    cuda_kernels = ("rms_norm_fwd",)

    def canon(self, attrs):
        return positive_eps(attrs)

    def infer(self, attrs, ins):
        shape = _rows(ins[0], (("gamma", ins[1]),), "rms_norm")
        dtype = same_dtype(ins)
        return [(shape, dtype), (shape[:-1], dtype)]

    def cost(self, attrs, ins, outs):
        return Cost(4.0 * numel(ins[0].shape), _moved(ins, outs) + nbytes(ins[0]))

    def gradient(self, g, node, dys, wanted):
        if dys[1] is not None:
            raise OpError("only output 0 (y) of rms_norm is differentiable; its statistics are not")
        if dys[0] is None:
            return [None, None]
        x, gamma = node.inputs
        dx, dgamma = g.apply("rms_norm_grad", [x, gamma, node.outputs[1], dys[0]])
        return [dx if wanted[0] else None, dgamma if wanted[1] else None]

    def cuda_launches(self, attrs, ins, outs):
        return [per_row("rms_norm_fwd", outs[0].dtype, tuple(ins[0].shape),
                            (OUT(0), OUT(1), IN(0), IN(1), scalar(outs[0].dtype, attrs["eps"])))]

    def compute(self, attrs, xs, ys):
        x, gamma = xs
        y, invrms = ys
        t = x.dtype.type
        np.divide(t(1), np.sqrt(np.sum(x * x, axis=-1) / t(x.shape[-1]) + t(attrs["eps"])), out=invrms)
        np.multiply(x * invrms[..., None], gamma, out=y)


@register
class RmsNormGrad(Op):
    """(x, gamma, invrms, dy) -> (dx, dgamma); with xhat = x * invrms and g = dy * gamma:
    dx = invrms * (g - xhat * sum(g * xhat) / D), dgamma = sum over rows of dy * xhat."""
    name, arity, differentiable = "rms_norm_grad", 4, False
    cuda_kernels = ("rms_norm_bwd_data", "rms_norm_bwd_params")

    def infer(self, attrs, ins):
        x, gamma, invrms, dy = ins
        shape = _rows(x, (("gamma", gamma),), "rms_norm_grad")
        _check_stats(shape, (("invrms", invrms),), "rms_norm_grad")
        if tuple(dy.shape) != shape:
            raise ShapeError(f"rms_norm_grad: dy has shape {tuple(dy.shape)}, x has {shape}; they must match")
        dtype = same_dtype(ins)
        return [(shape, dtype), ((shape[-1],), dtype)]

    def cost(self, attrs, ins, outs):
        return Cost(8.0 * numel(ins[0].shape), _moved(ins, outs) + 2 * nbytes(ins[0]))

    def cuda_launches(self, attrs, ins, outs):
        dtype, shape = outs[0].dtype, tuple(ins[0].shape)
        return [per_row("rms_norm_bwd_data", dtype, shape, (OUT(0), IN(0), IN(1), IN(2), IN(3))),
                _column_launch("rms_norm_bwd_params", dtype, shape, (OUT(1), IN(0), IN(2), IN(3)))]

    def compute(self, attrs, xs, ys):
        x, gamma, invrms, dy = xs
        dx, dgamma = ys
        t = x.dtype.type
        xhat = x * invrms[..., None]
        g = dy * gamma
        inner = g - xhat * (np.sum(g * xhat, axis=-1, keepdims=True) / t(x.shape[-1]))
        np.multiply(inner, invrms[..., None], out=dx)
        _sum_rows_in_order((dy * xhat).reshape(-1, x.shape[-1]), dgamma)
