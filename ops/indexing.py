"""Indexing operators, for graphs imported from PyTorch (Core ATen): ``gather``
(torch.gather) and ``index_select`` (torch.index_select), and their gradients
``gather_grad`` and ``index_select_grad``, deterministic scatter-adds: each dx element is
0 + dy[p1] + dy[p2] + ... over the positions p1 < p2 < ... that read it (np.add.at's order;
no atomics, so the bits never depend on timing). That is PyTorch's backward (scatter_add,
index_add into zeros) up to the order of the additions.

Indices are int32 or int64 (the CUDA kernels, indexing.cu, add ``_i64`` for int64); an
index outside [0, size) is a ValueError in the numpy twin (NaN in the CUDA kernels).
``gather`` takes at most ``MAX_DIMS`` dimensions."""
from __future__ import annotations

import numpy as np

from .cuda_launch import IN, OUT, grid_stride, i32, i64, kernel_name
from .registry import Cost, Op, OpError, ShapeError, check_attrs, nbytes, numel, register, require_float

MAX_DIMS = 6
INDEX_KERNEL_SUFFIX = {np.dtype(np.int32): "", np.dtype(np.int64): "_i64"}


# ---------------------------------------------------------------------- helpers

def _kernel(base: str, dtype, index_dtype) -> str:
    suffix = INDEX_KERNEL_SUFFIX.get(np.dtype(index_dtype))
    if suffix is None:
        raise OpError(f"{base} has CUDA kernels for int32 and int64 indices, not {np.dtype(index_dtype)}")
    return kernel_name(base, dtype) + suffix


def _check_index_dtype(index) -> None:
    if np.dtype(index.dtype).kind not in "iu":
        raise ShapeError(f"index must have an integer dtype (int32 or int64), got {np.dtype(index.dtype)}")


def _canon_axis(attrs, extra=None):
    a = check_attrs(attrs, {"axis": None, **(extra or {})}, required=["axis", *(extra or {})])
    axis = a["axis"]
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise OpError(f"axis must be an int, got {axis!r}")
    a["axis"] = int(axis)
    return a


def _canon_shape(value) -> tuple[int, ...]:
    try:
        shape = tuple(int(d) for d in value)
    except TypeError:
        raise OpError(f"shape must be a tuple of ints, got {value!r}") from None
    if any(d < 0 for d in shape):
        raise OpError(f"shape must have non-negative sizes, got {shape}")
    return shape


def _axis(axis: int, rank: int) -> int:
    if rank == 0:
        raise ShapeError("needs a tensor of at least one dimension, got a scalar")
    if not -rank <= axis < rank:
        raise ShapeError(f"axis {axis} is out of range for a tensor of {rank} dimensions")
    return axis % rank


def _check_index_values(index: np.ndarray, size: int, axis: int) -> None:
    """An out-of-range index would read another element or crash inside numpy; say which one."""
    bad = np.flatnonzero((index < 0) | (index >= size))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"index {int(index.flat[i])} at position {i} is outside [0, {size}), the size of axis "
                         f"{axis} ({bad.size} of {index.size} indices are out of range)")


def _gather_shapes(x_shape, index_shape, axis: int, what: str = "x") -> int:
    """Check torch.gather's rule (index has x's rank, no larger than x off the axis); the axis."""
    x_shape, index_shape = tuple(x_shape), tuple(index_shape)
    if len(index_shape) != len(x_shape):
        raise ShapeError(f"index must have {what}'s rank {len(x_shape)} ({what} {x_shape}), got shape {index_shape}")
    if len(x_shape) > MAX_DIMS:
        raise ShapeError(f"gather takes at most {MAX_DIMS} dimensions, got {len(x_shape)} ({x_shape})")
    axis = _axis(axis, len(x_shape))
    for d, (n, m) in enumerate(zip(x_shape, index_shape)):
        if d != axis and m > n:
            raise ShapeError(f"index {index_shape} is larger than {what} {x_shape} in dimension {d} "
                             f"({m} > {n}); off axis {axis} it may be at most {what}'s size")
    return axis


def _gather_coords(index: np.ndarray, axis: int) -> tuple:
    """Full coordinates into x for every index position: its own, with the axis's from index."""
    coords = list(np.indices(index.shape, sparse=True))
    coords[axis] = index.astype(np.intp)
    return tuple(coords)


def _padded_dims(shape) -> list[np.int32]:
    return [i32(d) for d in (1,) * (MAX_DIMS - len(shape)) + tuple(shape)]


def _select_view(shape, axis: int, j: int) -> tuple[int, int, int, int]:
    """(O, A, J, R): ``shape`` viewed as [O, A, R] around ``axis``; J the selected length."""
    return numel(shape[:axis]), shape[axis], j, numel(shape[axis + 1:])


class _Lookup(Op):
    """(x, index) -> values of x picked by index along ``axis`` (gather, index_select): each
    output element costs a flop and every byte moves once; the gradient reaches x only,
    through ``grad_op`` (index, dy) -> dx."""
    arity = 2
    grad_op = ""

    def canon(self, attrs):
        return _canon_axis(attrs)

    def cost(self, attrs, ins, outs):
        return Cost(float(numel(outs[0].shape)), float(sum(nbytes(t) for t in (*ins, *outs))))

    def gradient(self, g, node, dys, wanted):
        if dys[0] is None or not wanted[0]:
            return [None, None]
        x, index = node.inputs
        (dx,) = g.apply(self.grad_op, [index, dys[0]], shape=tuple(g.shape(x)), axis=node.attrs["axis"])
        return [dx, None]


class _LookupGrad(Op):
    """(index, dy) -> dx of ``shape``: a lookup's gradient, dy added into zeros in position order."""
    arity, differentiable = 2, False

    def canon(self, attrs):
        a = _canon_axis(attrs, {"shape": None})
        a["shape"] = _canon_shape(a["shape"])
        return a

    def cost(self, attrs, ins, outs):
        return Cost(float(numel(outs[0].shape)), float(sum(nbytes(t) for t in (*ins, *outs))))


# ---------------------------------------------------------------------- gather

@register
class Gather(_Lookup):
    """(x, index) -> y of index's shape: torch.gather, y[c] = x[c with c[axis] = index[c]]."""
    name, grad_op = "gather", "gather_grad"
    cuda_kernels = ("gather_fwd", "gather_fwd_i64")

    def infer(self, attrs, ins):
        x, index = ins
        require_float(x.dtype)
        _check_index_dtype(index)
        _gather_shapes(x.shape, index.shape, attrs["axis"])
        return [(tuple(index.shape), np.dtype(x.dtype))]

    def cuda_launches(self, attrs, ins, outs):
        x, index = ins
        rank = len(x.shape)
        axis = _axis(attrs["axis"], rank) + MAX_DIMS - rank
        n = numel(outs[0].shape)
        return [grid_stride(_kernel("gather_fwd", outs[0].dtype, index.dtype), n,
                            (OUT(0), IN(0), IN(1), *_padded_dims(x.shape), *_padded_dims(index.shape), i32(axis),
                             i64(n)), OUT(0), per_thread=1)]

    def compute(self, attrs, xs, ys):
        x, index = xs
        axis = _axis(attrs["axis"], x.ndim)
        _check_index_values(index, x.shape[axis], axis)
        ys[0][...] = x[_gather_coords(index, axis)]


@register
class GatherGrad(_LookupGrad):
    """(index, dy) -> dx of ``shape``: gather's gradient, dy scatter-added into zeros along
    ``axis`` (torch.scatter_add); each dx element sums its contributions in position order."""
    name = "gather_grad"
    cuda_kernels = ("gather_bwd", "gather_bwd_i64")

    def infer(self, attrs, ins):
        index, dy = ins
        _check_index_dtype(index)
        require_float(dy.dtype)
        if tuple(dy.shape) != tuple(index.shape):
            raise ShapeError(f"dy must have index's shape {tuple(index.shape)}, got {tuple(dy.shape)}")
        _gather_shapes(attrs["shape"], index.shape, attrs["axis"], what="shape")
        return [(attrs["shape"], np.dtype(dy.dtype))]

    def cuda_launches(self, attrs, ins, outs):
        """One thread per dx element, looping over the index along the axis (O(n * k))."""
        index = ins[0]
        shape = attrs["shape"]
        axis = _axis(attrs["axis"], len(shape)) + MAX_DIMS - len(shape)
        n = numel(shape)
        return [grid_stride(_kernel("gather_bwd", outs[0].dtype, index.dtype), n,
                            (OUT(0), IN(0), IN(1), *_padded_dims(shape), *_padded_dims(index.shape), i32(axis),
                             i64(n)), OUT(0), per_thread=1)]

    def compute(self, attrs, xs, ys):
        index, dy = xs
        axis = _axis(attrs["axis"], index.ndim)
        _check_index_values(index, attrs["shape"][axis], axis)
        ys[0].fill(0)
        # ufunc.at adds unbuffered, in position order: each element is 0 + dy[p1] + dy[p2] + ...
        np.add.at(ys[0], _gather_coords(index, axis), dy)


# ---------------------------------------------------------------------- index_select

def _select_shape(shape, index, axis: int) -> tuple[int, ...]:
    if len(index.shape) != 1:
        raise ShapeError(f"index must be 1-D (a list of positions along the axis), got shape {tuple(index.shape)}")
    a = _axis(axis, len(shape))
    return tuple(shape[:a]) + (index.shape[0],) + tuple(shape[a + 1:])


@register
class IndexSelect(_Lookup):
    """(x, index[J]) -> y: torch.index_select, x's slices at index along ``axis``."""
    name, grad_op = "index_select", "index_select_grad"
    cuda_kernels = ("index_select_fwd", "index_select_fwd_i64")

    def infer(self, attrs, ins):
        x, index = ins
        require_float(x.dtype)
        _check_index_dtype(index)
        return [(_select_shape(tuple(x.shape), index, attrs["axis"]), np.dtype(x.dtype))]

    def cuda_launches(self, attrs, ins, outs):
        x, index = ins
        _, a, j, r = _select_view(tuple(x.shape), _axis(attrs["axis"], len(x.shape)), index.shape[0])
        n = numel(outs[0].shape)
        return [grid_stride(_kernel("index_select_fwd", outs[0].dtype, index.dtype), n,
                            (OUT(0), IN(0), IN(1), i64(a), i64(j), i64(r), i64(n)), OUT(0), per_thread=1)]

    def compute(self, attrs, xs, ys):
        x, index = xs
        axis = _axis(attrs["axis"], x.ndim)
        _check_index_values(index, x.shape[axis], axis)
        np.take(x, index.astype(np.intp), axis=axis, out=ys[0])


@register
class IndexSelectGrad(_LookupGrad):
    """(index[J], dy) -> dx of ``shape``: index_select's gradient, dy's slices added into
    zeros at index along ``axis`` (torch.index_add), each in position order."""
    name = "index_select_grad"
    cuda_kernels = ("index_select_bwd", "index_select_bwd_i64")

    def infer(self, attrs, ins):
        index, dy = ins
        _check_index_dtype(index)
        require_float(dy.dtype)
        want = _select_shape(attrs["shape"], index, attrs["axis"])
        if tuple(dy.shape) != want:
            raise ShapeError(f"dy must have shape {want} (shape {attrs['shape']} with index's length along axis "
                             f"{attrs['axis']}), got {tuple(dy.shape)}")
        return [(attrs["shape"], np.dtype(dy.dtype))]

    def cuda_launches(self, attrs, ins, outs):
        """One thread per dx element, looping over the whole index (O(n * J))."""
        index = ins[0]
        shape = attrs["shape"]
        _, a, j, r = _select_view(shape, _axis(attrs["axis"], len(shape)), index.shape[0])
        n = numel(shape)
        return [grid_stride(_kernel("index_select_bwd", outs[0].dtype, index.dtype), n,
                            (OUT(0), IN(0), IN(1), i64(a), i64(j), i64(r), i64(n)), OUT(0), per_thread=1)]

    def compute(self, attrs, xs, ys):
        index, dy = xs
        shape = attrs["shape"]
        axis = _axis(attrs["axis"], len(shape))
        _check_index_values(index, shape[axis], axis)
        ys[0].fill(0)
        # one np.add.at over the slices: position j's slice lands after j-1's (position order)
        coords = [slice(None)] * len(shape)
        coords[axis] = index.astype(np.intp)
        np.add.at(ys[0], tuple(coords), dy)
