"""GELU, the transformer MLP's activation, and its gradient. By default the tanh
approximation GPT-2 uses:

    gelu(x) = 0.5 x (1 + tanh(c (x + a x^3))),  c = sqrt(2/pi), a = 0.044715

Evaluated left to right in x's dtype with the constants cast to it first, as the CUDA
kernels do (only tanh may differ in the last bit). With the attribute ``approximate="none"``
(PyTorch's default), the exact GELU in PyTorch's evaluation order:

    gelu(x) = (x * 0.5) * (1 + erf(x * (1/sqrt 2)))
    gelu'(x) = 0.5 (1 + erf(x / sqrt 2)) + x * (1/sqrt(2 pi)) exp(-x^2 / 2)

"tanh" is the default and is left out of the canonical attributes, so graphs built before the
attribute existed keep their attributes (and fingerprints)."""
from __future__ import annotations

import math

import numpy as np

from .cuda_launch import IN, OUT, grid_stride, i64, kernel_name
from .registry import Cost, Op, OpError, ShapeError, check_attrs, emit, nbytes, numel, register, require_float, \
    same_dtype

C = 0.7978845608028654      # sqrt(2 / pi)
A = 0.044715
A3 = 0.134145               # 3 * A, written out so numpy and CUDA round the same decimal
SQRT1_2 = 0.7071067811865476          # M_SQRT1_2 = 1/sqrt(2)
BETA = 0.3989422804014327             # M_2_SQRTPI * M_SQRT1_2 * 0.5 = 1/sqrt(2 pi), PyTorch's kBeta
APPROXIMATIONS = ("tanh", "none")
_erf = np.frompyfunc(math.erf, 1, 1)


def _canon(attrs) -> dict:
    """{} for the tanh approximation (the default, as before the attribute existed), else
    {"approximate": "none"}."""
    a = check_attrs(attrs, {"approximate": "tanh"})
    if a["approximate"] not in APPROXIMATIONS:
        raise OpError(f"approximate must be one of {APPROXIMATIONS}, got {a['approximate']!r}")
    return {} if a["approximate"] == "tanh" else {"approximate": "none"}


def _exact(attrs) -> bool:
    return attrs.get("approximate", "tanh") == "none"


def erf(x: np.ndarray) -> np.ndarray:
    """erf element-wise (math.erf, the C library's, in float64), rounded to x's dtype."""
    return np.asarray(_erf(x.astype(np.float64)), dtype=np.float64).astype(x.dtype)


def _inner(x: np.ndarray):
    """(x*x, tanh(c * (x + a * (x*x*x)))) in x's dtype."""
    t = x.dtype.type
    x2 = x * x
    return x2, np.tanh(t(C) * (x + t(A) * (x2 * x)))


def _launch(base: str, attrs, ins, outs) -> list:
    if _exact(attrs):
        base = base.replace("gelu_", "gelu_erf_")
    n = numel(outs[0].shape)
    args = (OUT(0), *(IN(i) for i in range(len(ins))), i64(n))
    return [grid_stride(kernel_name(base, outs[0].dtype), n, args, OUT(0))]


@register
class Gelu(Op):
    """x -> gelu(x); its gradient reads x (not y: gelu is not invertible)."""
    name = "gelu"
    cuda_kernels = ("gelu_fwd", "gelu_erf_fwd")

    def canon(self, attrs):
        return _canon(attrs)

    def infer(self, attrs, ins):
        require_float(ins[0].dtype)
        return [(tuple(ins[0].shape), np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        return Cost(10.0 * numel(ins[0].shape), float(nbytes(ins[0]) + nbytes(outs[0])))

    def gradient(self, g, node, dys, wanted):
        if dys[0] is None:
            return [None]
        return [emit(g, "gelu_grad", [node.inputs[0], dys[0]], **node.attrs)]

    def cuda_launches(self, attrs, ins, outs):
        return _launch("gelu_fwd", attrs, ins, outs)

    def compute(self, attrs, xs, ys):
        x = xs[0]
        t = x.dtype.type
        if _exact(attrs):
            np.multiply(x * t(0.5), t(1) + erf(x * t(SQRT1_2)), out=ys[0])
            return
        _, th = _inner(x)
        np.multiply(t(0.5) * x, t(1) + th, out=ys[0])


@register
class GeluGrad(Op):
    """(x, dy) -> dx = dy * (0.5 (1 + th) + 0.5 x (1 - th^2) c (1 + 3a x^2)), th = tanh(...);
    with approximate="none", dx = dy * (cdf + x * pdf), cdf = 0.5 (1 + erf(x / sqrt 2)),
    pdf = beta exp(-0.5 x^2) (PyTorch's gelu_backward)."""
    name, arity, differentiable = "gelu_grad", 2, False
    cuda_kernels = ("gelu_bwd", "gelu_erf_bwd")

    def canon(self, attrs):
        return _canon(attrs)

    def infer(self, attrs, ins):
        if tuple(ins[0].shape) != tuple(ins[1].shape):
            raise ShapeError(f"x has shape {tuple(ins[0].shape)} and dy {tuple(ins[1].shape)}; they must match")
        dtype = same_dtype(ins)
        require_float(dtype)
        return [(tuple(ins[0].shape), dtype)]

    def cost(self, attrs, ins, outs):
        return Cost(16.0 * numel(ins[0].shape), float(sum(nbytes(t) for t in ins) + nbytes(outs[0])))

    def cuda_launches(self, attrs, ins, outs):
        return _launch("gelu_bwd", attrs, ins, outs)

    def compute(self, attrs, xs, ys):
        x, dy = xs
        t = x.dtype.type
        if _exact(attrs):
            cdf = t(0.5) * (t(1) + erf(x * t(SQRT1_2)))
            pdf = t(BETA) * np.exp((x * x) * t(-0.5))
            np.multiply(dy, cdf + x * pdf, out=ys[0])
            return
        x2, th = _inner(x)
        du = t(C) * (t(1) + t(A3) * x2)
        slope = t(0.5) * (t(1) + th) + (t(0.5) * x) * ((t(1) - th * th) * du)
        np.multiply(dy, slope, out=ys[0])
