"""Operators that move data without arithmetic: concat, split and reshape."""
from __future__ import annotations

import operator

import numpy as np

from .cuda_launch import IN, OUT, copy_rows
from .registry import Cost, Op, OpError, ShapeError, check_attrs, emit, nbytes, numel, register, same_dtype, zeros_like


def _int(value, what: str) -> int:
    # operator.index rejects floats and strings instead of silently truncating them.
    try:
        return operator.index(value)
    except TypeError:
        raise OpError(f"{what} must be an int, got {value!r}") from None


def _int_tuple(value, what: str) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise OpError(f"{what} must be a sequence of ints, got {value!r}")
    return tuple(_int(v, what) for v in value)


def _axis(axis: int, shape) -> int:
    """``axis`` for a tensor of ``shape``, negative values counted from the end."""
    nd = len(shape)
    if not -nd <= axis < nd:
        raise ShapeError(f"axis {axis} is out of range for shape {tuple(shape)}")
    return axis % nd


def _rows(shape, axis: int) -> tuple[int, int]:
    """(rows, elements per unit of ``axis``): shape as [rows, shape[axis], inner] row-major."""
    return numel(shape[:axis]), numel(shape[axis + 1:])


def _copy_cost(ins, outs) -> Cost:
    return Cost(0.0, float(sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs)))


@register
class Concat(Op):
    """(x0, x1, ...) -> y, joined along ``axis``; every other dimension must match."""
    name, arity = "concat", None
    cuda_kernels = ("copy_rows",)

    def canon(self, attrs):
        a = check_attrs(attrs, {"axis": 1})
        return {"axis": _int(a["axis"], "axis")}

    def infer(self, attrs, ins):
        first = tuple(ins[0].shape)
        axis = _axis(attrs["axis"], first)
        for i, t in enumerate(ins[1:], 1):
            shape = tuple(t.shape)
            if len(shape) != len(first) or shape[:axis] + shape[axis + 1:] != first[:axis] + first[axis + 1:]:
                raise ShapeError(f"input {i} has shape {shape} but input 0 has {first}: "
                                 f"every dimension except axis {axis} must match")
        size = sum(t.shape[axis] for t in ins)
        return [(first[:axis] + (size,) + first[axis + 1:], same_dtype(ins))]

    def cost(self, attrs, ins, outs):
        return _copy_cost(ins, outs)

    def gradient(self, g, node, dys, wanted):
        if dys[0] is None:
            return [None] * len(node.inputs)
        axis = _axis(node.attrs["axis"], g.shape(dys[0]))
        sizes = tuple(g.shape(x)[axis] for x in node.inputs)
        parts = g.apply("split", [dys[0]], axis=axis, sizes=sizes)
        return [p if w else None for p, w in zip(parts, wanted)]

    def cuda_launches(self, attrs, ins, outs):
        """One strided row copy per input into its slice of y."""
        shape = tuple(outs[0].shape)
        axis = _axis(attrs["axis"], shape)
        rows, inner = _rows(shape, axis)
        size, at = np.dtype(outs[0].dtype).itemsize, 0
        launches = []
        for i, t in enumerate(ins):
            width = t.shape[axis] * inner
            launches.append(copy_rows(OUT(0), IN(i), rows, width, shape[axis] * inner, width, at, 0, size, piece=True))
            at += width
        return launches

    def compute(self, attrs, xs, ys):
        np.concatenate(xs, axis=attrs["axis"], out=ys[0])


@register
class Split(Op):
    """x -> len(sizes) pieces along ``axis``, of the given sizes in order."""
    name = "split"
    cuda_kernels = ("copy_rows",)

    def canon(self, attrs):
        a = check_attrs(attrs, {"axis": 1, "sizes": None}, required=["sizes"])
        sizes = _int_tuple(a["sizes"], "sizes")
        if not sizes or any(s <= 0 for s in sizes):
            raise OpError(f"sizes must be a non-empty sequence of positive ints, got {a['sizes']!r}")
        return {"axis": _int(a["axis"], "axis"), "sizes": sizes}

    def infer(self, attrs, ins):
        shape = tuple(ins[0].shape)
        axis = _axis(attrs["axis"], shape)
        sizes = attrs["sizes"]
        if sum(sizes) != shape[axis]:
            raise ShapeError(f"split sizes {sizes} sum to {sum(sizes)}, but axis {axis} of the input "
                             f"{shape} has {shape[axis]}; the sizes must sum to {shape[axis]}")
        dtype = np.dtype(ins[0].dtype)
        return [(shape[:axis] + (s,) + shape[axis + 1:], dtype) for s in sizes]

    def cost(self, attrs, ins, outs):
        return _copy_cost(ins, outs)

    def gradient(self, g, node, dys, wanted):
        if all(d is None for d in dys):
            return [None]
        # Pieces nobody differentiated still occupy their slice of dx: fill it with zeros.
        parts = [d if d is not None else zeros_like(g, y) for d, y in zip(dys, node.outputs)]
        return [emit(g, "concat", parts, axis=node.attrs["axis"])]

    def cuda_launches(self, attrs, ins, outs):
        """One strided row copy per piece, from its slice of x."""
        shape = tuple(ins[0].shape)
        axis = _axis(attrs["axis"], shape)
        rows, inner = _rows(shape, axis)
        size, at = np.dtype(ins[0].dtype).itemsize, 0
        launches = []
        for k, s in enumerate(attrs["sizes"]):
            width = s * inner
            launches.append(copy_rows(OUT(k), IN(0), rows, width, width, shape[axis] * inner, 0, at, size))
            at += width
        return launches

    def compute(self, attrs, xs, ys):
        x = xs[0]
        axis = _axis(attrs["axis"], x.shape)
        start = 0
        for y, size in zip(ys, attrs["sizes"]):
            np.copyto(y, x[(slice(None),) * axis + (slice(start, start + size),)])
            start += size


@register
class Reshape(Op):
    """x -> y with the same elements in row-major order and shape ``shape``; one entry may be
    -1, meaning whatever makes the element counts agree. Attributes keep the -1 as given."""
    name = "reshape"
    cuda_kernels = ("copy_rows",)

    def canon(self, attrs):
        a = check_attrs(attrs, {"shape": None}, required=["shape"])
        shape = _int_tuple(a["shape"], "shape")
        if any(d < -1 for d in shape) or shape.count(-1) > 1:
            raise OpError(f"shape must hold non-negative ints and at most one -1, got {a['shape']!r}")
        return {"shape": shape}

    def infer(self, attrs, ins):
        src, target = tuple(ins[0].shape), attrs["shape"]
        count = numel(src)
        if -1 in target:
            known = numel(d for d in target if d != -1)
            if known == 0 or count % known:
                raise ShapeError(f"cannot reshape {src} ({count} elements) to {target}: "
                                 f"{count} is not a multiple of {known}")
            target = tuple(count // known if d == -1 else d for d in target)
        elif numel(target) != count:
            raise ShapeError(f"cannot reshape {src} ({count} elements) to {target} "
                             f"({numel(target)} elements); the counts must match")
        return [(target, np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        return _copy_cost(ins, outs)

    def gradient(self, g, node, dys, wanted):
        if dys[0] is None:
            return [None]
        return [emit(g, "reshape", [dys[0]], shape=tuple(g.shape(node.inputs[0])))]

    def cuda_launches(self, attrs, ins, outs):
        n = numel(ins[0].shape)
        return [copy_rows(OUT(0), IN(0), 1, n, n, n, 0, 0, np.dtype(ins[0].dtype).itemsize)]

    def compute(self, attrs, xs, ys):
        np.copyto(ys[0], xs[0].reshape(ys[0].shape))
