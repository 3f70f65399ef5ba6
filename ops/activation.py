"""GELU, the transformer MLP's activation (the tanh approximation GPT-2 uses), and its gradient:

    gelu(x) = 0.5 x (1 + tanh(c (x + a x^3))),  c = sqrt(2/pi), a = 0.044715

Evaluated left to right in x's dtype with the constants cast to it first, as the CUDA
kernels do (only tanh may differ in the last bit)."""
from __future__ import annotations

import numpy as np

from .cuda_launch import IN, OUT, grid_stride, i64, kernel_name
from .registry import Cost, Op, ShapeError, emit, nbytes, numel, register, require_float, same_dtype

C = 0.7978845608028654      # sqrt(2 / pi)
A = 0.044715
A3 = 0.134145               # 3 * A, written out so numpy and CUDA round the same decimal


def _inner(x: np.ndarray):
    """(x*x, tanh(c * (x + a * (x*x*x)))) in x's dtype."""
    t = x.dtype.type
    x2 = x * x
    return x2, np.tanh(t(C) * (x + t(A) * (x2 * x)))


def _launch(base: str, ins, outs) -> list:
    n = numel(outs[0].shape)
    args = (OUT(0), *(IN(i) for i in range(len(ins))), i64(n))
    return [grid_stride(kernel_name(base, outs[0].dtype), n, args, OUT(0))]


@register
class Gelu(Op):
    """x -> gelu(x); its gradient reads x (not y: gelu is not invertible)."""
    name = "gelu"
    cuda_kernels = ("gelu_fwd",)

    def infer(self, attrs, ins):
        require_float(ins[0].dtype)
        return [(tuple(ins[0].shape), np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        return Cost(10.0 * numel(ins[0].shape), float(nbytes(ins[0]) + nbytes(outs[0])))

    def gradient(self, g, node, dys, wanted):
        if dys[0] is None:
            return [None]
        return [emit(g, "gelu_grad", [node.inputs[0], dys[0]])]

    def cuda_launches(self, attrs, ins, outs):
        return _launch("gelu_fwd", ins, outs)

    def compute(self, attrs, xs, ys):
        x = xs[0]
        t = x.dtype.type
        _, th = _inner(x)
        np.multiply(t(0.5) * x, t(1) + th, out=ys[0])


@register
class GeluGrad(Op):
    """(x, dy) -> dx = dy * (0.5 (1 + th) + 0.5 x (1 - th^2) c (1 + 3a x^2)), th = tanh(...)."""
    name, arity, differentiable = "gelu_grad", 2, False
    cuda_kernels = ("gelu_bwd",)

    def infer(self, attrs, ins):
        if tuple(ins[0].shape) != tuple(ins[1].shape):
            raise ShapeError(f"x has shape {tuple(ins[0].shape)} and dy {tuple(ins[1].shape)}; they must match")
        dtype = same_dtype(ins)
        require_float(dtype)
        return [(tuple(ins[0].shape), dtype)]

    def cost(self, attrs, ins, outs):
        return Cost(16.0 * numel(ins[0].shape), float(sum(nbytes(t) for t in ins) + nbytes(outs[0])))

    def cuda_launches(self, attrs, ins, outs):
        return _launch("gelu_bwd", ins, outs)

    def compute(self, attrs, xs, ys):
        x, dy = xs
        t = x.dtype.type
        x2, th = _inner(x)
        du = t(C) * (t(1) + t(A3) * x2)
        slope = t(0.5) * (t(1) + th) + (t(0.5) * x) * ((t(1) - th * th) * du)
        np.multiply(dy, slope, out=ys[0])
