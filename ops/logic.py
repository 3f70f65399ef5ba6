"""Comparisons and logic, for graphs imported from PyTorch (Core ATen): ``compare`` (eq, ne,
lt, le, gt, ge of two tensors, NumPy broadcasting), ``compare_scalar`` (a tensor against a
Python number), ``logical`` (and, or, xor of two bool tensors, broadcasting),
``logical_not`` and ``reduce_bool`` (any, all over axes). Every output is bool (one byte, 0
or 1) and has no gradient: the operators are not differentiable, and autodiff never asks
them for one (a bool output never depends on a parameter through a differentiable path).

The CUDA kernels (logic.cu) read their inputs through broadcast.cu's six-dimension strides
and follow C's comparisons, which are IEEE's and numpy's (NaN compares unequal to all), so
every kernel gives numpy's bits."""
from __future__ import annotations

import numbers

import numpy as np

from .broadcast import _bcast_args, _check_rank, _choice, _reduce_attrs, _reduce_kernel_args, _reduced_shape
from .broadcast import _axes, _resolve_axes, broadcast_shapes
from .cuda_launch import IN, OUT, grid_stride, i32, i64
from .registry import Op, OpError, ShapeError, check_attrs, numel, register, same_dtype

COMPARE_FNS = ("eq", "ne", "lt", "le", "gt", "ge")
LOGICAL_FNS = ("and", "or", "xor")
REDUCE_BOOL_FNS = ("any", "all")
# The dtype codes logic.cu's compare kernels switch on.
COMPARE_DTYPES = ("float32", "float64", "int32", "int64", "bool")
_COMPARE_UFUNC = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
                  "ge": np.greater_equal}
_LOGICAL_UFUNC = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}
_BOOL = np.dtype(bool)


def _compare_dtype(dtype, fn: str) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype.name not in COMPARE_DTYPES:
        raise ShapeError(f"compares {', '.join(COMPARE_DTYPES)} tensors, got {dtype}")
    if dtype == _BOOL and fn not in ("eq", "ne"):
        raise ShapeError(f"bool tensors compare with eq or ne only, not {fn}; cast them first")
    return dtype


def _require_bool(ins) -> None:
    for k, t in enumerate(ins):
        if np.dtype(t.dtype) != _BOOL:
            raise ShapeError(f"input {k} has dtype {np.dtype(t.dtype)}; logical operators take bool inputs "
                             f"(compare or cast first)")


def _name(base: str, dtype) -> str:
    return base + "_f64" if np.dtype(dtype) == np.float64 else base


def _grid(kernel: str, n: int, args):
    return grid_stride(kernel, n, args, OUT(0), per_thread=1)


@register
class Compare(Op):
    """y = a fn b (bool), fn in eq, ne, lt, le, gt, ge, with NumPy broadcasting; a and b of one
    dtype (float32, float64, int32, int64; bool for eq and ne)."""
    name, arity, differentiable = "compare", 2, False
    cuda_kernels = ("logic_compare",)

    def canon(self, attrs):
        a = check_attrs(attrs, {"fn": None}, required=["fn"])
        return {"fn": _choice(a["fn"], COMPARE_FNS, "fn")}

    def infer(self, attrs, ins):
        _compare_dtype(same_dtype(ins), attrs["fn"])
        return [(broadcast_shapes(ins[0].shape, ins[1].shape), _BOOL)]

    def compute(self, attrs, xs, ys):
        _COMPARE_UFUNC[attrs["fn"]](xs[0], xs[1], out=ys[0])

    def cuda_launches(self, attrs, ins, outs):
        shape = tuple(outs[0].shape)
        n = numel(shape)
        dtype = np.dtype(ins[0].dtype)
        args = (OUT(0), IN(0), IN(1), i32(COMPARE_DTYPES.index(dtype.name)), i32(COMPARE_FNS.index(attrs["fn"])),
                *_bcast_args(shape, ins[0].shape, ins[1].shape), i64(n))
        return [_grid(_name("logic_compare", dtype), n, args)]


def _scalar_mode(dtype, value) -> int:
    """How compare_scalar compares: 0 in x's (float) dtype, value rounded to it; 1 in int64
    (an integer or bool x, an integer value); 2 in float64 (an integer or bool x, a float value)."""
    if np.dtype(dtype).kind == "f":
        return 0
    return 1 if isinstance(value, int) else 2


@register
class CompareScalar(Op):
    """y = x fn value (bool), fn in eq, ne, lt, le, gt, ge, ``value`` a Python number. A float
    x compares in its own dtype (value rounded to it, as PyTorch's wrapped scalars); an integer
    (or bool) x compares with an integer value exactly, with a float value in float64."""
    name, differentiable = "compare_scalar", False
    cuda_kernels = ("logic_compare_scalar",)

    def canon(self, attrs):
        a = check_attrs(attrs, {"fn": None, "value": None}, required=["fn", "value"])
        value = a["value"]
        if isinstance(value, (bool, np.bool_)):
            value = int(value)
        elif isinstance(value, numbers.Integral):
            value = int(value)
            if not -2**63 <= value < 2**63:
                raise OpError(f"value {value} does not fit int64")
        elif isinstance(value, numbers.Real):
            value = float(value)
        else:
            raise OpError(f"value must be a Python number (int, float or bool), got {value!r}")
        return {"fn": _choice(a["fn"], COMPARE_FNS, "fn"), "value": value}

    def infer(self, attrs, ins):
        _compare_dtype(ins[0].dtype, attrs["fn"])
        return [(tuple(ins[0].shape), _BOOL)]

    def compute(self, attrs, xs, ys):
        x, value = xs[0], attrs["value"]
        mode = _scalar_mode(x.dtype, value)
        if mode == 0:
            v = x.dtype.type(float(value))
        elif mode == 1:
            x, v = x.astype(np.int64), np.int64(value)
        else:
            x, v = x.astype(np.float64), np.float64(value)
        _COMPARE_UFUNC[attrs["fn"]](x, v, out=ys[0])

    def cuda_launches(self, attrs, ins, outs):
        dtype = np.dtype(ins[0].dtype)
        value = attrs["value"]
        mode = _scalar_mode(dtype, value)
        n = numel(outs[0].shape)
        args = (OUT(0), IN(0), i32(COMPARE_DTYPES.index(dtype.name)), i32(COMPARE_FNS.index(attrs["fn"])),
                i32(mode), np.float64(value), i64(value if mode == 1 else 0), i64(n))
        return [_grid(_name("logic_compare_scalar", dtype), n, args)]


@register
class Logical(Op):
    """y = a fn b, fn in and, or, xor, of two bool tensors, with NumPy broadcasting."""
    name, arity, differentiable = "logical", 2, False
    cuda_kernels = ("logic_binary",)

    def canon(self, attrs):
        a = check_attrs(attrs, {"fn": None}, required=["fn"])
        return {"fn": _choice(a["fn"], LOGICAL_FNS, "fn")}

    def infer(self, attrs, ins):
        _require_bool(ins)
        return [(broadcast_shapes(ins[0].shape, ins[1].shape), _BOOL)]

    def compute(self, attrs, xs, ys):
        _LOGICAL_UFUNC[attrs["fn"]](xs[0], xs[1], out=ys[0])

    def cuda_launches(self, attrs, ins, outs):
        shape = tuple(outs[0].shape)
        n = numel(shape)
        args = (OUT(0), IN(0), IN(1), i32(LOGICAL_FNS.index(attrs["fn"])),
                *_bcast_args(shape, ins[0].shape, ins[1].shape), i64(n))
        return [_grid("logic_binary", n, args)]


@register
class LogicalNot(Op):
    """y = not x, x bool."""
    name, differentiable = "logical_not", False
    cuda_kernels = ("logic_not",)

    def infer(self, attrs, ins):
        _require_bool(ins)
        return [(tuple(ins[0].shape), _BOOL)]

    def compute(self, attrs, xs, ys):
        np.logical_not(xs[0], out=ys[0])

    def cuda_launches(self, attrs, ins, outs):
        n = numel(outs[0].shape)
        return [_grid("logic_not", n, (OUT(0), IN(0), i64(n)))]


@register
class ReduceBool(Op):
    """y = any or all (``fn``) of bool x over ``axes``, keeping them as size 1 if ``keepdim``.
    Negative axes are resolved to sorted non-negative ones (as ``reduce``); an empty
    reduction gives any False, all True."""
    name, differentiable = "reduce_bool", False
    cuda_kernels = ("logic_reduce",)

    def canon(self, attrs):
        a = dict(attrs)
        if "fn" not in a:
            raise OpError("missing attributes ['fn']")
        fn = _choice(a.pop("fn"), REDUCE_BOOL_FNS, "fn")
        return {"fn": fn, **_reduce_attrs(a)}

    def infer(self, attrs, ins):
        shape = _check_rank(ins[0].shape, "x")
        _require_bool(ins)
        axes = _resolve_axes(attrs, shape)
        return [(_reduced_shape(shape, axes, attrs["keepdim"]), _BOOL)]

    def compute(self, attrs, xs, ys):
        f = np.any if attrs["fn"] == "any" else np.all
        f(xs[0], axis=attrs["axes"], keepdims=attrs["keepdim"], out=ys[0])

    def cuda_launches(self, attrs, ins, outs):
        shape = tuple(ins[0].shape)
        args, count, n = _reduce_kernel_args(shape, _axes(attrs["axes"], len(shape)))
        return [_grid("logic_reduce", n, (OUT(0), IN(0), i32(REDUCE_BOOL_FNS.index(attrs["fn"])), *args,
                                          i64(count), i64(n)))]
