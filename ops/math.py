"""Element-wise math for graphs imported from PyTorch (Core ATen): unary functions, a tensor
and a Python scalar, dtype casts, and strided slices, with their gradients.

Each function follows PyTorch's forward formula and its derivative in
tools/autograd/derivatives.yaml, evaluated left to right in the tensor's dtype with the
constants cast to it first; the CUDA kernels (ops/math.cu) use the same order without FMA
contraction, so only the transcendental functions (exp, log, sin, cos, pow) may
differ from numpy in the last bits.

- ``unary(x; fn)`` and ``unary_grad(x, y, dy; fn)``: the gradient takes the input x, the
  output y and dy whatever ``fn`` is (a fixed arity), and reads what PyTorch's formula
  reads: y for exp, sqrt, rsqrt and reciprocal, x for the others (neg needs neither; its
  gradient is ``unary(dy; neg)``).
- ``scalar(x; fn, value)`` and ``scalar_grad(x, dy; fn, value)``: the linear functions'
  gradients are ``scalar`` or ``unary`` applications (add and sub pass dy through);
  pow, maximum and minimum read x through ``scalar_grad``. maximum and minimum (clamp_min,
  clamp_max) pass dy only where x is strictly above (below) the value, as PyTorch 2.x's
  autograd does (0 at a tie and at NaN).
- ``cast(x; dtype)``: numpy's astype (float to int truncates toward zero, as PyTorch).
  Float to float casts are differentiable (dy is cast back); anything from or to an
  integer or bool dtype has no gradient (the gradient is None).
- ``slice(x; axis, start, stop, step)``: PyTorch's slice.Tensor; ``slice_grad(dy; shape,
  axis, start, stop, step)`` is slice_backward (zeros with dy at the sliced positions).
"""
from __future__ import annotations

import operator

import numpy as np

from .cuda_launch import IN, OUT, copy_rows, grid_stride, i32, i64, kernel_name, scalar
from .registry import Cost, Op, OpError, ShapeError, check_attrs, emit, nbytes, numel, register, require_float, \
    same_dtype

UNARY_FNS = ("neg", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "abs", "reciprocal", "silu")
SCALAR_FNS = ("add", "sub", "rsub", "mul", "div", "pow", "maximum", "minimum")
CAST_DTYPES = ("float32", "float64", "int32", "int64", "bool")

# Flops per element (a transcendental function counts as a few).
_UNARY_FLOPS = {"neg": 1, "abs": 1, "reciprocal": 1, "sqrt": 2, "rsqrt": 2, "exp": 4, "log": 4, "sin": 4,
                "cos": 4, "silu": 6}
_UNARY_GRAD_FLOPS = {"neg": 1, "abs": 2, "reciprocal": 3, "sqrt": 2, "rsqrt": 4, "exp": 1, "log": 1, "sin": 5,
                     "cos": 5, "silu": 10}

POW_SPECIAL = (0.0, 1.0, 2.0, 3.0, 0.5, -0.5, -1.0, -2.0)     # exponents PyTorch evaluates without pow

def _fn(attrs, fns, extra=None) -> dict:
    allowed = {"fn": None, **(extra or {})}
    a = check_attrs(attrs, allowed, required=list(allowed))
    if a["fn"] not in fns:
        raise OpError(f"fn must be one of {', '.join(fns)}; got {a['fn']!r}")
    return a


def _same_shape(ins, names) -> tuple[int, ...]:
    shapes = [tuple(t.shape) for t in ins]
    if len(set(shapes)) != 1:
        raise ShapeError("inputs must have one shape, got " + ", ".join(f"{n} {s}" for n, s in zip(names, shapes)))
    return shapes[0]


def _map_launch(base: str, ins, outs, *extra) -> list:
    """One grid-stride launch: (y, inputs..., extra scalars..., n)."""
    n = numel(outs[0].shape)
    args = (OUT(0), *(IN(i) for i in range(len(ins))), *extra, i64(n))
    return [grid_stride(kernel_name(base, outs[0].dtype), n, args, OUT(0))]


def _moved(ins, outs) -> float:
    return float(sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs))


# ---------------------------------------------------------------------------- unary

def _unary(fn: str, x: np.ndarray, y: np.ndarray) -> None:
    t = x.dtype.type
    if fn == "neg":
        np.negative(x, out=y)
    elif fn == "exp":
        np.exp(x, out=y)
    elif fn == "log":
        np.log(x, out=y)
    elif fn == "sqrt":
        np.sqrt(x, out=y)
    elif fn == "rsqrt":                         # 1 / sqrt(x), as PyTorch's CPU kernel
        np.sqrt(x, out=y)
        np.divide(t(1), y, out=y)
    elif fn == "sin":
        np.sin(x, out=y)
    elif fn == "cos":
        np.cos(x, out=y)
    elif fn == "abs":
        np.abs(x, out=y)
    elif fn == "reciprocal":
        np.divide(t(1), x, out=y)
    elif fn == "silu":                          # x / (1 + exp(-x))
        np.divide(x, np.exp(np.negative(x)) + t(1), out=y)
    else:
        raise OpError(f"unknown unary fn {fn!r}")


def _unary_grad(fn: str, x: np.ndarray, y: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
    """PyTorch's derivatives.yaml formulas, in their evaluation order."""
    t = dy.dtype.type
    if fn == "neg":                             # -grad
        np.negative(dy, out=dx)
    elif fn == "exp":                           # grad * result
        np.multiply(dy, y, out=dx)
    elif fn == "log":                           # grad / self
        np.divide(dy, x, out=dx)
    elif fn == "sqrt":                          # grad / (2 * result)
        np.divide(dy, t(2) * y, out=dx)
    elif fn == "rsqrt":                         # -0.5 * grad * result.pow(3)
        np.multiply(t(-0.5) * dy, (y * y) * y, out=dx)
    elif fn == "sin":                           # grad * self.cos()
        np.multiply(dy, np.cos(x), out=dx)
    elif fn == "cos":                           # grad * -self.sin()
        np.multiply(dy, np.negative(np.sin(x)), out=dx)
    elif fn == "abs":                           # grad * self.sgn()
        np.multiply(dy, np.sign(x), out=dx)
    elif fn == "reciprocal":                    # -grad * (result * result)
        np.multiply(np.negative(dy), y * y, out=dx)
    elif fn == "silu":                          # grad * sig * (1 + x * (1 - sig))
        sig = t(1) / (np.exp(np.negative(x)) + t(1))
        np.multiply(dy * sig, t(1) + x * (t(1) - sig), out=dx)
    else:
        raise OpError(f"unknown unary fn {fn!r}")


@register
class Unary(Op):
    """y = fn(x) for fn in UNARY_FNS (PyTorch's neg, exp, log, sqrt, rsqrt, sin, cos, abs,
    reciprocal, silu; the exact GELU is ``gelu(approximate="none")``, ops/activation.py)."""
    name = "unary"
    cuda_kernels = ("unary",)

    def canon(self, attrs):
        return {"fn": _fn(attrs, UNARY_FNS)["fn"]}

    def infer(self, attrs, ins):
        require_float(ins[0].dtype)
        return [(tuple(ins[0].shape), np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        return Cost(float(_UNARY_FLOPS[attrs["fn"]] * numel(outs[0].shape)), _moved(ins, outs))

    def gradient(self, g, node, dys, wanted):
        if dys[0] is None:
            return [None]
        fn = node.attrs["fn"]
        if fn == "neg":
            return [emit(g, "unary", [dys[0]], fn="neg")]
        return [emit(g, "unary_grad", [node.inputs[0], node.outputs[0], dys[0]], fn=fn)]

    def compute(self, attrs, xs, ys):
        with np.errstate(all="ignore"):
            _unary(attrs["fn"], xs[0], ys[0])

    def cuda_launches(self, attrs, ins, outs):     # (y, x, fn, n)
        return _map_launch("unary", ins, outs, i32(UNARY_FNS.index(attrs["fn"])))


@register
class UnaryGrad(Op):
    """(x, y, dy) -> dx for ``unary`` with the same fn (y = unary(x))."""
    name, arity, differentiable = "unary_grad", 3, False
    cuda_kernels = ("unary_grad",)

    def canon(self, attrs):
        return {"fn": _fn(attrs, UNARY_FNS)["fn"]}

    def infer(self, attrs, ins):
        shape = _same_shape(ins, ("x", "y", "dy"))
        dtype = same_dtype(ins)
        require_float(dtype)
        return [(shape, dtype)]

    def cost(self, attrs, ins, outs):
        return Cost(float(_UNARY_GRAD_FLOPS[attrs["fn"]] * numel(outs[0].shape)), _moved(ins, outs))

    def compute(self, attrs, xs, ys):
        with np.errstate(all="ignore"):
            _unary_grad(attrs["fn"], *xs, ys[0])

    def cuda_launches(self, attrs, ins, outs):     # (dx, x, y, dy, fn, n)
        return _map_launch("unary_grad", ins, outs, i32(UNARY_FNS.index(attrs["fn"])))


# ---------------------------------------------------------------------------- scalar

def _pow(x: np.ndarray, e, out: np.ndarray) -> None:
    """x ** e (e of x's dtype) with PyTorch's special exponents, which skip pow."""
    t = x.dtype.type
    if e == 0:
        out.fill(1)
    elif e == 1:
        np.copyto(out, x)
    elif e == 2:
        np.multiply(x, x, out=out)
    elif e == 3:
        np.multiply(x * x, x, out=out)
    elif e == 0.5:
        np.sqrt(x, out=out)
    elif e == -0.5:
        np.divide(t(1), np.sqrt(x), out=out)
    elif e == -1:
        np.divide(t(1), x, out=out)
    elif e == -2:
        np.divide(t(1), x * x, out=out)
    else:
        np.power(x, e, out=out)


def _scalar(fn: str, x: np.ndarray, value: float, y: np.ndarray) -> None:
    v = x.dtype.type(value)
    if fn == "add":
        np.add(x, v, out=y)
    elif fn == "sub":
        np.subtract(x, v, out=y)
    elif fn == "rsub":
        np.subtract(v, x, out=y)
    elif fn == "mul":
        np.multiply(x, v, out=y)
    elif fn == "div":
        np.divide(x, v, out=y)
    elif fn == "pow":
        _pow(x, v, y)
    elif fn == "maximum":                       # NaN propagates, as clamp_min
        np.maximum(x, v, out=y)
    elif fn == "minimum":
        np.minimum(x, v, out=y)
    else:
        raise OpError(f"unknown scalar fn {fn!r}")


def _scalar_grad(fn: str, x: np.ndarray, dy: np.ndarray, value: float, dx: np.ndarray) -> None:
    t = dy.dtype.type
    v = t(value)
    if fn in ("add", "sub"):
        np.copyto(dx, dy)
    elif fn == "rsub":
        np.negative(dy, out=dx)
    elif fn == "mul":
        np.multiply(dy, v, out=dx)
    elif fn == "div":
        np.divide(dy, v, out=dx)
    elif fn == "pow":                           # exponent == 0 ? 0 : grad * (exponent * self.pow(exponent - 1))
        if v == 0:
            dx.fill(0)
        else:
            p = np.empty_like(x)
            _pow(x, t(value - 1), p)
            np.multiply(dy, v * p, out=dx)
    elif fn == "maximum":                       # clamp_min: where(self > min, grad, 0)
        np.copyto(dx, np.where(x > v, dy, t(0)))
    elif fn == "minimum":                       # clamp_max: where(self < max, grad, 0)
        np.copyto(dx, np.where(x < v, dy, t(0)))
    else:
        raise OpError(f"unknown scalar fn {fn!r}")


def _scalar_attrs(attrs) -> dict:
    a = _fn(attrs, SCALAR_FNS, {"value": None})
    try:
        value = float(a["value"])
    except (TypeError, ValueError):
        raise OpError(f"value must be a number, got {a['value']!r}") from None
    return {"fn": a["fn"], "value": value}


@register
class ScalarOp(Op):
    """y = fn(x, value), value a Python float: add x+v, sub x-v, rsub v-x, mul x*v, div x/v,
    pow x**v (PyTorch's pow.Tensor_Scalar), maximum/minimum (clamp_min/clamp_max)."""
    name = "scalar"
    cuda_kernels = ("scalar",)

    def canon(self, attrs):
        return _scalar_attrs(attrs)

    def infer(self, attrs, ins):
        require_float(ins[0].dtype)
        return [(tuple(ins[0].shape), np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        flops = 4 if attrs["fn"] == "pow" and attrs["value"] not in POW_SPECIAL else 1
        return Cost(float(flops * numel(outs[0].shape)), _moved(ins, outs))

    def gradient(self, g, node, dys, wanted):
        dy = dys[0]
        if dy is None:
            return [None]
        fn, v = node.attrs["fn"], node.attrs["value"]
        if fn in ("add", "sub"):
            return [dy]
        if fn == "rsub":
            return [emit(g, "unary", [dy], fn="neg")]
        if fn in ("mul", "div"):
            return [emit(g, "scalar", [dy], fn=fn, value=v)]
        return [emit(g, "scalar_grad", [node.inputs[0], dy], fn=fn, value=v)]

    def compute(self, attrs, xs, ys):
        with np.errstate(all="ignore"):
            _scalar(attrs["fn"], xs[0], attrs["value"], ys[0])

    def cuda_launches(self, attrs, ins, outs):     # (y, x, fn, v, n)
        dt = outs[0].dtype
        return _map_launch("scalar", ins, outs, i32(SCALAR_FNS.index(attrs["fn"])), scalar(dt, attrs["value"]))


@register
class ScalarGrad(Op):
    """(x, dy) -> dx for ``scalar`` with the same fn and value (every fn; the gradient of
    ``scalar`` uses it for pow, maximum and minimum)."""
    name, arity, differentiable = "scalar_grad", 2, False
    cuda_kernels = ("scalar_grad",)

    def canon(self, attrs):
        return _scalar_attrs(attrs)

    def infer(self, attrs, ins):
        shape = _same_shape(ins, ("x", "dy"))
        dtype = same_dtype(ins)
        require_float(dtype)
        return [(shape, dtype)]

    def cost(self, attrs, ins, outs):
        flops = 5 if attrs["fn"] == "pow" and attrs["value"] - 1 not in POW_SPECIAL else 2
        return Cost(float(flops * numel(outs[0].shape)), _moved(ins, outs))

    def compute(self, attrs, xs, ys):
        with np.errstate(all="ignore"):
            _scalar_grad(attrs["fn"], xs[0], xs[1], attrs["value"], ys[0])

    def cuda_launches(self, attrs, ins, outs):     # (dx, x, dy, fn, v, v - 1, n)
        dt, v = outs[0].dtype, attrs["value"]
        return _map_launch("scalar_grad", ins, outs, i32(SCALAR_FNS.index(attrs["fn"])), scalar(dt, v),
                           scalar(dt, v - 1))


# ---------------------------------------------------------------------------- cast

def _cast_dtype(dtype, what: str) -> str:
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = None
    if name not in CAST_DTYPES:
        raise (OpError if what == "dtype" else ShapeError)(
            f"cast supports {', '.join(CAST_DTYPES)}; {what} is {dtype!r}")
    return name


@register
class Cast(Op):
    """y = x.astype(dtype) (float to int truncates toward zero, nonzero to bool is True).
    Only float to float casts carry a gradient; from or to int or bool, the gradient is None."""
    name = "cast"
    cuda_kernels = ("cast",)

    def canon(self, attrs):
        a = check_attrs(attrs, {"dtype": None}, required=["dtype"])
        return {"dtype": _cast_dtype(a["dtype"], "dtype")}

    def infer(self, attrs, ins):
        _cast_dtype(ins[0].dtype, "the input's dtype")
        return [(tuple(ins[0].shape), np.dtype(attrs["dtype"]))]

    def gradient(self, g, node, dys, wanted):
        src, dst = np.dtype(g.dtype(node.inputs[0])), np.dtype(node.attrs["dtype"])
        if dys[0] is None or src.kind != "f" or dst.kind != "f":
            return [None]                       # integer and bool values have no gradient
        if np.dtype(g.dtype(dys[0])) == src:
            return [dys[0]]
        return [emit(g, "cast", [dys[0]], dtype=src.name)]

    def compute(self, attrs, xs, ys):
        with np.errstate(all="ignore"):
            np.copyto(ys[0], xs[0], casting="unsafe")

    def cuda_launches(self, attrs, ins, outs):     # (y, x, src code, dst code, n)
        src, dst = np.dtype(ins[0].dtype).name, np.dtype(outs[0].dtype).name
        kernel = "cast_f64" if "float64" in (src, dst) else "cast"
        n = numel(outs[0].shape)
        args = (OUT(0), IN(0), i32(CAST_DTYPES.index(src)), i32(CAST_DTYPES.index(dst)), i64(n))
        return [grid_stride(kernel, n, args, OUT(0))]


# ---------------------------------------------------------------------------- slice

def _int(value, what: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise OpError(f"{what} must be an int, got {value!r}") from None


def slice_bounds(attrs, shape) -> tuple[int, int, int, int, int]:
    """(axis, start, stop, step, count) for a tensor of ``shape``, as PyTorch's slice.Tensor:
    negative start and stop count from the end, both clamped to [0, length], stop >= start."""
    nd = len(shape)
    axis = attrs["axis"]
    if not -nd <= axis < nd:
        raise ShapeError(f"axis {axis} is out of range for shape {tuple(shape)}")
    axis %= nd
    length = shape[axis]
    start = attrs["start"]
    stop = length if attrs["stop"] is None else attrs["stop"]
    start = start + length if start < 0 else start
    stop = stop + length if stop < 0 else stop
    start = min(max(start, 0), length)
    stop = min(max(stop, start), length)
    step = attrs["step"]
    return axis, start, stop, step, (stop - start + step - 1) // step


def _slice_attrs(attrs, extra=None) -> dict:
    a = check_attrs(attrs, {"axis": 0, "start": 0, "stop": None, "step": 1, **(extra or {})})
    out = {"axis": _int(a["axis"], "axis"), "start": _int(a["start"], "start"),
           "stop": None if a["stop"] is None else _int(a["stop"], "stop"), "step": _int(a["step"], "step")}
    if out["step"] < 1:
        raise OpError(f"step must be a positive int (PyTorch slices forward only), got {out['step']}")
    return out


def _index(axis: int, start: int, stop: int, step: int) -> tuple:
    return (slice(None),) * axis + (slice(start, stop, step),)


def _slice_launch(base: str, dtype, outer_shape, axis, start, step, count, n) -> list:
    """(out, in, count, inner, length, start, step, n): the kernel indexes the sliced tensor's
    (outer, count, inner) and the full tensor's (outer, length, inner) views."""
    inner, length = numel(outer_shape[axis + 1:]), outer_shape[axis]
    args = (OUT(0), IN(0), i64(count), i64(inner), i64(length), i64(start), i64(step), i64(n))
    return [grid_stride(kernel_name(base, dtype), n, args, OUT(0))]


@register
class Slice(Op):
    """y = x[..., start:stop:step, ...] along ``axis`` (PyTorch's slice.Tensor; stop None is
    the end, step >= 1). Any dtype; CUDA copies with step > 1 take float dtypes."""
    name = "slice"
    cuda_kernels = ("slice_fwd", "copy_rows")

    def canon(self, attrs):
        return _slice_attrs(attrs)

    def infer(self, attrs, ins):
        shape = tuple(ins[0].shape)
        axis, _, _, _, count = slice_bounds(attrs, shape)
        return [(shape[:axis] + (count,) + shape[axis + 1:], np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        return Cost(0.0, float(2 * nbytes(outs[0])))

    def gradient(self, g, node, dys, wanted):
        x = node.inputs[0]
        if dys[0] is None or np.dtype(g.dtype(x)).kind != "f":
            return [None]
        shape = tuple(g.shape(x))
        axis, start, stop, step, _ = slice_bounds(node.attrs, shape)
        return [emit(g, "slice_grad", [dys[0]], shape=shape, axis=axis, start=start, stop=stop, step=step)]

    def compute(self, attrs, xs, ys):
        axis, start, stop, step, _ = slice_bounds(attrs, xs[0].shape)
        np.copyto(ys[0], xs[0][_index(axis, start, stop, step)])

    def cuda_launches(self, attrs, ins, outs):
        shape = tuple(ins[0].shape)
        axis, start, _, step, count = slice_bounds(attrs, shape)
        inner = numel(shape[axis + 1:])
        if step == 1:       # rows of count * inner elements, one per outer index
            return [copy_rows(OUT(0), IN(0), numel(shape[:axis]), count * inner, count * inner,
                              shape[axis] * inner, 0, start * inner, np.dtype(ins[0].dtype).itemsize)]
        return _slice_launch("slice_fwd", outs[0].dtype, shape, axis, start, step, count, numel(outs[0].shape))


@register
class SliceGrad(Op):
    """dy -> dx of shape ``shape``: zeros, with dy at the positions ``slice`` (same axis,
    start, stop, step) takes (PyTorch's slice_backward). Its own gradient is that slice."""
    name = "slice_grad"
    cuda_kernels = ("slice_bwd",)

    def canon(self, attrs):
        a = _slice_attrs({k: v for k, v in attrs.items() if k != "shape"})
        if "shape" not in attrs:
            raise OpError("missing attributes ['shape']")
        shape = attrs["shape"]
        if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
            raise OpError(f"shape must be a sequence of ints, got {shape!r}")
        a["shape"] = tuple(_int(d, "shape") for d in shape)
        if any(d < 0 for d in a["shape"]):
            raise OpError(f"negative dimension in shape {a['shape']}")
        return a

    def infer(self, attrs, ins):
        shape = attrs["shape"]
        axis, _, _, _, count = slice_bounds(attrs, shape)
        want = shape[:axis] + (count,) + shape[axis + 1:]
        if tuple(ins[0].shape) != want:
            raise ShapeError(f"dy has shape {tuple(ins[0].shape)}, but slicing {shape} along axis {axis} "
                             f"gives {want}")
        require_float(ins[0].dtype)
        return [(shape, np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        return Cost(0.0, _moved(ins, outs))

    def gradient(self, g, node, dys, wanted):
        if dys[0] is None:
            return [None]
        a = node.attrs
        return [emit(g, "slice", [dys[0]], axis=a["axis"], start=a["start"], stop=a["stop"], step=a["step"])]

    def compute(self, attrs, xs, ys):
        axis, start, stop, step, _ = slice_bounds(attrs, attrs["shape"])
        ys[0].fill(0)
        ys[0][_index(axis, start, stop, step)] = xs[0]

    def cuda_launches(self, attrs, ins, outs):
        shape = attrs["shape"]
        axis, start, _, step, count = slice_bounds(attrs, shape)
        return _slice_launch("slice_bwd", outs[0].dtype, shape, axis, start, step, count, numel(shape))
