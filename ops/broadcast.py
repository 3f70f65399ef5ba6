"""Broadcasting operators, for graphs imported from PyTorch (Core ATen): element-wise binary
arithmetic with NumPy broadcasting (``binary``), ``where``, reductions over axes (``reduce``),
``broadcast_to`` (PyTorch's expand), and the gradient operators they need (``binary_grad``
for maximum/minimum, ``reduce_grad`` for amax/amin). Gradients follow PyTorch's formulas
(derivatives.yaml), so float64 gradients agree with torch.autograd's to rounding, and each
input's gradient is summed back to its own shape by :func:`sum_to`.

Shapes have at most ``MAX_DIMS`` dimensions: the CUDA kernels (broadcast.cu) take the output's
dimensions and each operand's strides along them (0 where it is broadcast) as arguments."""
from __future__ import annotations

import operator

import numpy as np

from .cuda_launch import IN, OUT, WS, grid_stride, i32, i64, kernel_name
from .registry import (Cost, Op, OpError, ShapeError, check_attrs, emit, nbytes, numel, register, require_float,
                       same_dtype)

MAX_DIMS = 6
BINARY_FNS = ("add", "sub", "mul", "div", "maximum", "minimum")
REDUCE_FNS = ("sum", "mean", "amax", "amin")
_UFUNC = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
          "minimum": np.minimum}


# ---------------------------------------------------------------------- shape helpers

def _check_rank(shape, what: str) -> tuple[int, ...]:
    shape = tuple(int(d) for d in shape)
    if len(shape) > MAX_DIMS:
        raise ShapeError(f"{what} has {len(shape)} dimensions {shape}; broadcasting operators take at most "
                         f"{MAX_DIMS}")
    return shape


def broadcast_shapes(*shapes, what: str = "inputs") -> tuple[int, ...]:
    """NumPy's broadcast of ``shapes`` (right-aligned; a 1 stretches), at most MAX_DIMS dimensions."""
    shapes = [_check_rank(s, what) for s in shapes]
    nd = max(len(s) for s in shapes)
    out = []
    for k in range(nd):
        sizes = {s[k - nd + len(s)] for s in shapes if k - nd + len(s) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise ShapeError(f"{what} of shapes {' and '.join(str(s) for s in shapes)} do not broadcast: "
                             f"sizes {sorted(sizes)} meet in dimension {k - nd} (counted from the end); "
                             f"each must be equal or 1")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _contiguous_strides(shape) -> list[int]:
    return [numel(shape[i + 1:]) for i in range(len(shape))]


def _padded(out_shape, shape) -> tuple[list[int], list[int]]:
    """(dims, strides): ``out_shape`` padded in front to MAX_DIMS with 1s, and the element
    strides of a contiguous tensor of ``shape`` read along them (0 where it is broadcast)."""
    nd = len(out_shape)
    s = (1,) * (nd - len(shape)) + tuple(shape)
    strides = [0 if d == 1 else st for d, st in zip(s, _contiguous_strides(s))]
    pad = MAX_DIMS - nd
    return [1] * pad + list(out_shape), [0] * pad + strides


def _bcast_args(out_shape, *operands):
    """Kernel arguments: the output's six dims (int32), then six strides (int64) per operand."""
    dims, _ = _padded(out_shape, out_shape)
    args = [i32(d) for d in dims]
    for shape in operands:
        args += [i64(s) for s in _padded(out_shape, shape)[1]]
    return args


def _axes(axes, rank: int) -> tuple[int, ...]:
    """``axes`` resolved for a tensor of ``rank``: non-negative, sorted, each once."""
    out = []
    for a in axes:
        if not -rank <= a < rank:
            raise ShapeError(f"axis {a} is out of range for a tensor of {rank} dimensions")
        out.append(a % rank)
    if len(set(out)) != len(out):
        raise ShapeError(f"axes {tuple(axes)} name a dimension twice (rank {rank})")
    return tuple(sorted(out))


def _reduced_shape(shape, axes, keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _float_pair(ins) -> np.dtype:
    dtype = same_dtype(ins)
    require_float(dtype)
    return dtype


def _neg(g, t) -> int:
    """-t, exactly: (-1.0) * t."""
    minus = emit(g, "fill", [], shape=(), dtype=str(g.dtype(t)), value=-1.0)
    return emit(g, "binary", [minus, t], fn="mul")


def sum_to(g, t, shape) -> int:
    """``t`` summed down to ``shape`` (the gradient of broadcasting to ``t``'s shape): ``t``
    itself if it has that shape, else a ``reduce`` sum over the leading and stretched axes
    (keepdim), then a ``reshape`` where the ranks differ."""
    shape = tuple(int(d) for d in shape)
    src = tuple(g.shape(t))
    if src == shape:
        return t
    lead = len(src) - len(shape)
    if lead < 0 or any(d != 1 and d != src[lead + i] for i, d in enumerate(shape)):
        raise ShapeError(f"cannot sum a tensor of shape {src} down to {shape}: {shape} does not broadcast to {src}")
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and src[lead + i] != 1)
    if axes:
        t = emit(g, "reduce", [t], fn="sum", axes=axes, keepdim=True)
    if tuple(g.shape(t)) != shape:
        t = emit(g, "reshape", [t], shape=shape)
    return t


def _choice(value, allowed, what: str) -> str:
    if value not in allowed:
        raise OpError(f"{what} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def _grid(kernel: str, dtype, n: int, args, target=OUT(0)):
    return grid_stride(kernel_name(kernel, dtype), n, args, target, per_thread=1)


# ---------------------------------------------------------------------- operators

@register
class Binary(Op):
    """y = a fn b, fn in add, sub, mul, div, maximum, minimum, with NumPy broadcasting."""
    name, arity = "binary", 2
    cuda_kernels = ("bcast_binary",)

    def canon(self, attrs):
        a = check_attrs(attrs, {"fn": None}, required=["fn"])
        return {"fn": _choice(a["fn"], BINARY_FNS, "fn")}

    def infer(self, attrs, ins):
        dtype = _float_pair(ins)
        return [(broadcast_shapes(ins[0].shape, ins[1].shape), dtype)]

    def gradient(self, g, node, dys, wanted):
        dy = dys[0]
        if dy is None:
            return [None, None]
        a, b = node.inputs
        fn = node.attrs["fn"]

        def bin_(f, u, v):
            return emit(g, "binary", [u, v], fn=f)

        def grad(side):
            if fn == "add":
                return dy
            if fn == "sub":
                return dy if side == 0 else _neg(g, dy)
            if fn == "mul":
                return bin_("mul", dy, b if side == 0 else a)
            if fn == "div":     # dy / b;  -dy * ((a / b) / b), PyTorch's div_tensor_other_backward
                if side == 0:
                    return bin_("div", dy, b)
                return bin_("mul", _neg(g, dy), bin_("div", bin_("div", a, b), b))
            return emit(g, "binary_grad", [a, b, dy], fn=fn, side=side)

        return [sum_to(g, grad(i), g.shape(x)) if wanted[i] else None for i, x in enumerate(node.inputs)]

    def compute(self, attrs, xs, ys):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            _UFUNC[attrs["fn"]](xs[0], xs[1], out=ys[0])

    def cuda_launches(self, attrs, ins, outs):
        shape = tuple(outs[0].shape)
        n = numel(shape)
        args = (OUT(0), IN(0), IN(1), i32(BINARY_FNS.index(attrs["fn"])),
                *_bcast_args(shape, ins[0].shape, ins[1].shape), i64(n))
        return [_grid(self.cuda_kernels[0], outs[0].dtype, n, args)]


@register
class BinaryGrad(Op):
    """(a, b, dy) -> the gradient of maximum or minimum (``fn``) for input ``side`` (0: a,
    1: b), in dy's (the broadcast) shape: PyTorch's where(a == b, dy / 2, dy), zero where
    the other input wins."""
    name, arity, differentiable = "binary_grad", 3, False
    cuda_kernels = ("minmax_grad",)

    def canon(self, attrs):
        a = check_attrs(attrs, {"fn": None, "side": None}, required=["fn", "side"])
        side = a["side"]
        if side not in (0, 1) or isinstance(side, bool):
            raise OpError(f"side must be 0 (a) or 1 (b); got {side!r}")
        return {"fn": _choice(a["fn"], ("maximum", "minimum"), "fn"), "side": int(side)}

    def infer(self, attrs, ins):
        dtype = _float_pair(ins)
        shape = broadcast_shapes(ins[0].shape, ins[1].shape)
        if tuple(ins[2].shape) != shape:
            raise ShapeError(f"dy has shape {tuple(ins[2].shape)}, but a {tuple(ins[0].shape)} and "
                             f"b {tuple(ins[1].shape)} broadcast to {shape}")
        return [(shape, dtype)]

    def compute(self, attrs, xs, ys):
        a, b, dy = xs
        loses = (a < b) if (attrs["fn"] == "maximum") == (attrs["side"] == 0) else (a > b)
        y = ys[0]
        np.copyto(y, np.where(a == b, dy / 2, dy))
        y[np.broadcast_to(loses, y.shape)] = 0

    def cuda_launches(self, attrs, ins, outs):
        shape = tuple(outs[0].shape)
        n = numel(shape)
        args = (OUT(0), IN(0), IN(1), IN(2), i32(("maximum", "minimum").index(attrs["fn"])), i32(attrs["side"]),
                *_bcast_args(shape, ins[0].shape, ins[1].shape, ins[2].shape), i64(n))
        return [_grid(self.cuda_kernels[0], outs[0].dtype, n, args)]


@register
class Where(Op):
    """y = cond ? a : b, the three broadcast together; cond is bool (or uint8), a and b one
    floating dtype. cond has no gradient."""
    name, arity = "where", 3
    cuda_kernels = ("bcast_where",)

    def infer(self, attrs, ins):
        cond = np.dtype(ins[0].dtype)
        if cond not in (np.dtype(bool), np.dtype(np.uint8)):
            raise ShapeError(f"cond must be bool (or uint8), got {cond}")
        dtype = _float_pair(ins[1:])
        return [(broadcast_shapes(*(t.shape for t in ins)), dtype)]

    def gradient(self, g, node, dys, wanted):
        dy = dys[0]
        if dy is None:
            return [None, None, None]
        cond = node.inputs[0]
        zero = emit(g, "fill", [], shape=(), dtype=str(g.dtype(dy)), value=0.0)
        out = [None]
        for i, x in enumerate(node.inputs[1:], 1):
            if not wanted[i]:
                out.append(None)
                continue
            pair = [dy, zero] if i == 1 else [zero, dy]
            out.append(sum_to(g, emit(g, "where", [cond, *pair]), g.shape(x)))
        return out

    def compute(self, attrs, xs, ys):
        np.copyto(ys[0], np.where(xs[0], xs[1], xs[2]))

    def cuda_launches(self, attrs, ins, outs):
        shape = tuple(outs[0].shape)
        n = numel(shape)
        args = (OUT(0), IN(0), IN(1), IN(2), *_bcast_args(shape, *(t.shape for t in ins)), i64(n))
        return [_grid(self.cuda_kernels[0], outs[0].dtype, n, args)]


@register
class BroadcastTo(Op):
    """y = x broadcast to ``shape`` (numpy's broadcast_to, PyTorch's expand, materialised).
    A -1 in ``shape`` keeps the size of x's dimension there, as in expand."""
    name = "broadcast_to"
    cuda_kernels = ("bcast_copy",)

    def canon(self, attrs):
        a = check_attrs(attrs, {"shape": None}, required=["shape"])
        try:
            shape = tuple(operator.index(d) for d in a["shape"])
        except TypeError:
            raise OpError(f"shape must be a sequence of ints, got {a['shape']!r}") from None
        if any(d < -1 for d in shape):
            raise OpError(f"shape must hold sizes >= 0 (or -1 to keep one), got {shape}")
        return {"shape": shape}

    def infer(self, attrs, ins):
        src = tuple(ins[0].shape)
        target = attrs["shape"]
        lead = len(target) - len(src)
        if lead < 0:
            raise ShapeError(f"cannot broadcast {src} to {target}: the target has fewer dimensions")
        if any(d == -1 for d in target[:lead]):
            raise ShapeError(f"-1 in {target} stands for no dimension of x {src}")
        target = tuple(src[i - lead] if d == -1 else d for i, d in enumerate(target))
        _check_rank(target, "the target shape")
        for i, d in enumerate(src):
            if d != 1 and d != target[lead + i]:
                raise ShapeError(f"cannot broadcast {src} to {target}: dimension {i} of x has size {d}, "
                                 f"the target {target[lead + i]}; only sizes 1 stretch")
        return [(target, np.dtype(ins[0].dtype))]

    def gradient(self, g, node, dys, wanted):
        if dys[0] is None:
            return [None]
        return [sum_to(g, dys[0], g.shape(node.inputs[0]))]

    def compute(self, attrs, xs, ys):
        np.copyto(ys[0], np.broadcast_to(xs[0], ys[0].shape))

    def cuda_launches(self, attrs, ins, outs):
        shape = tuple(outs[0].shape)
        n = numel(shape)
        return [_grid(self.cuda_kernels[0], outs[0].dtype, n,
                      (OUT(0), IN(0), *_bcast_args(shape, ins[0].shape), i64(n)))]


def _reduce_attrs(attrs, fn_default=None):
    allowed = {"axes": None, "keepdim": False}
    if fn_default is not None:
        allowed["fn"] = None
    a = check_attrs(attrs, allowed, required=["axes"] + (["fn"] if fn_default is not None else []))
    axes = a["axes"]
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    try:
        axes = tuple(sorted({operator.index(v) for v in axes}))
    except TypeError:
        raise OpError(f"axes must be a sequence of ints, got {a['axes']!r}") from None
    if not isinstance(a["keepdim"], (bool, np.bool_)):
        raise OpError(f"keepdim must be a bool, got {a['keepdim']!r}")
    out = {"axes": axes, "keepdim": bool(a["keepdim"])}
    if fn_default is not None:
        out = {"fn": _choice(a["fn"], REDUCE_FNS, "fn"), **out}
    return out


def _resolve_axes(attrs, shape) -> tuple[int, ...]:
    """The attributes' axes for an input of ``shape``, written back non-negative: canon cannot
    see the rank, so negative axes are resolved here, where the graph builder stores the
    attributes it gave ``infer``."""
    axes = _axes(attrs["axes"], len(shape))
    if axes != attrs["axes"]:
        attrs["axes"] = axes
    return axes


def _reduce_kernel_args(shape, axes) -> tuple[list, int, int]:
    """(kept dims, x's strides along them, reduced dims, x's strides along them) padded to
    MAX_DIMS, the reduced count R and the output count."""
    strides = _contiguous_strides(shape)
    kept = [i for i in range(len(shape)) if i not in axes]
    pad_k, pad_r = MAX_DIMS - len(kept), MAX_DIMS - len(axes)
    kd = [1] * pad_k + [shape[i] for i in kept]
    ks = [0] * pad_k + [strides[i] for i in kept]
    rd = [1] * pad_r + [shape[i] for i in axes]
    rs = [0] * pad_r + [strides[i] for i in axes]
    args = [*(i32(d) for d in kd), *(i64(s) for s in ks), *(i32(d) for d in rd), *(i64(s) for s in rs)]
    return args, numel(shape[i] for i in axes), numel(kd)


@register
class Reduce(Op):
    """y = fn(x) over ``axes`` (sum, mean, amax, amin), keeping them as size 1 if ``keepdim``.
    Negative axes are allowed and resolved to sorted non-negative ones; empty ``axes``
    reduces nothing (numpy's axis=())."""
    name = "reduce"
    cuda_kernels = ("bcast_reduce",)

    def canon(self, attrs):
        return _reduce_attrs(attrs, fn_default=True)

    def infer(self, attrs, ins):
        shape = _check_rank(ins[0].shape, "x")
        require_float(ins[0].dtype)
        axes = _resolve_axes(attrs, shape)
        if attrs["fn"] in ("amax", "amin") and any(shape[a] == 0 for a in axes):
            raise ShapeError(f"{attrs['fn']} over axes {axes} of {shape}: an empty reduction has no extreme")
        return [(_reduced_shape(shape, axes, attrs["keepdim"]), np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        return Cost(float(numel(ins[0].shape)), float(nbytes(ins[0]) + nbytes(outs[0])))

    def gradient(self, g, node, dys, wanted):
        dy = dys[0]
        if dy is None:
            return [None]
        x = node.inputs[0]
        shape = tuple(g.shape(x))
        axes, fn = _axes(node.attrs["axes"], len(shape)), node.attrs["fn"]
        if fn in ("amax", "amin"):
            return [emit(g, "reduce_grad", [x, node.outputs[0], dy], axes=axes, keepdim=node.attrs["keepdim"])]
        keep = _reduced_shape(shape, axes, True)
        if tuple(g.shape(dy)) != keep:
            dy = emit(g, "reshape", [dy], shape=keep)
        if fn == "mean":            # PyTorch: grad.expand(sizes) / N; dividing first gives the same bits
            count = emit(g, "fill", [], shape=(), dtype=str(g.dtype(dy)), value=float(numel(shape[a] for a in axes)))
            dy = emit(g, "binary", [dy, count], fn="div")
        if keep != shape:
            dy = emit(g, "broadcast_to", [dy], shape=shape)
        return [dy]

    def compute(self, attrs, xs, ys):
        f = {"sum": np.sum, "mean": np.mean, "amax": np.amax, "amin": np.amin}[attrs["fn"]]
        with np.errstate(invalid="ignore", divide="ignore"):
            f(xs[0], axis=attrs["axes"], keepdims=attrs["keepdim"], out=ys[0])

    def cuda_launches(self, attrs, ins, outs):
        shape = tuple(ins[0].shape)
        args, count, n = _reduce_kernel_args(shape, _axes(attrs["axes"], len(shape)))
        return [_grid(self.cuda_kernels[0], outs[0].dtype, n,
                      (OUT(0), IN(0), i32(REDUCE_FNS.index(attrs["fn"])), *args, i64(count), i64(n)))]


@register
class ReduceGrad(Op):
    """(x, y, dy) -> dx, the gradient of amax or amin over ``axes`` (y and dy shaped as that
    reduction's output, with ``keepdim`` as it had): dy spread evenly over the elements equal
    to the extreme, PyTorch's (dy / count) * mask."""
    name, arity, differentiable = "reduce_grad", 3, False
    cuda_kernels = ("reduce_count", "reduce_spread")

    def canon(self, attrs):
        return _reduce_attrs(attrs)

    def infer(self, attrs, ins):
        shape = _check_rank(ins[0].shape, "x")
        dtype = _float_pair(ins)
        axes = _resolve_axes(attrs, shape)
        want = _reduced_shape(shape, axes, attrs["keepdim"])
        for what, t in (("y", ins[1]), ("dy", ins[2])):
            if tuple(t.shape) != want:
                raise ShapeError(f"{what} has shape {tuple(t.shape)}, but reducing x {shape} over axes {axes} "
                                 f"(keepdim={attrs['keepdim']}) gives {want}")
        return [(shape, dtype)]

    def cost(self, attrs, ins, outs):
        return Cost(3.0 * numel(ins[0].shape), float(sum(nbytes(t) for t in (*ins, *outs))))

    def compute(self, attrs, xs, ys):
        x, y, dy = xs
        axes = attrs["axes"]
        keep = _reduced_shape(x.shape, axes, True)
        mask = x == y.reshape(keep)
        count = np.sum(mask, axis=axes, keepdims=True).astype(x.dtype)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.multiply(dy.reshape(keep) / count, mask, out=ys[0])

    def cuda_workspaces(self, attrs, ins, outs):
        return (numel(ins[1].shape) * np.dtype(ins[1].dtype).itemsize,)

    def cuda_launches(self, attrs, ins, outs):
        shape = tuple(ins[0].shape)
        axes = _axes(attrs["axes"], len(shape))
        args, count, n_out = _reduce_kernel_args(shape, axes)
        dtype = outs[0].dtype
        n = numel(shape)
        keep = _reduced_shape(shape, axes, True)
        return [_grid("reduce_count", dtype, n_out, (WS(0), IN(0), IN(1), *args, i64(count), i64(n_out)), WS(0)),
                _grid("reduce_spread", dtype, n, (OUT(0), IN(0), IN(1), IN(2), WS(0), *_bcast_args(shape, keep),
                                                  i64(n)))]
