"""Embedding lookup (a gather of table rows by integer ids) and its gradient, a
deterministic scatter-add: each table row sums the gradient rows of the positions that
looked it up, in position order (no atomics, so the bits never depend on timing)."""
from __future__ import annotations

import numpy as np

from .cuda_launch import IN, OUT, grid_stride, i32, i64, kernel_name, per_block
from .registry import Cost, Op, OpError, ShapeError, check_attrs, nbytes, numel, register, require_float

ID_KERNEL_SUFFIX = {np.dtype(np.int32): "", np.dtype(np.int64): "_i64"}


def _kernel(base: str, dtype, id_dtype) -> str:
    suffix = ID_KERNEL_SUFFIX.get(np.dtype(id_dtype))
    if suffix is None:
        raise OpError(f"embedding has CUDA kernels for int32 and int64 ids, not {np.dtype(id_dtype)}")
    return kernel_name(base, dtype) + suffix


def _check_ids(ids) -> None:
    if np.dtype(ids.dtype).kind not in "iu":
        raise ShapeError(f"ids must have an integer dtype (row numbers), got {np.dtype(ids.dtype)}")


def _check_id_values(ids: np.ndarray, vocab: int) -> None:
    """An out-of-range id would read another row or crash inside numpy; say which one."""
    bad = np.flatnonzero((ids < 0) | (ids >= vocab))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"id {int(ids.flat[i])} at position {i} is outside the table's rows [0, {vocab}) "
                         f"({bad.size} of {ids.size} ids are out of range)")


@register
class Embedding(Op):
    """(table[V, D], ids[...]) -> y[..., D], y[p] = table[ids[p]]."""
    name, arity = "embedding", 2
    cuda_kernels = ("embedding_fwd", "embedding_fwd_i64")

    def infer(self, attrs, ins):
        table, ids = ins
        if len(table.shape) != 2 or 0 in tuple(table.shape):
            raise ShapeError(f"table must be a non-empty [V, D] matrix, got shape {tuple(table.shape)}")
        require_float(table.dtype)
        _check_ids(ids)
        return [(tuple(ids.shape) + (table.shape[1],), np.dtype(table.dtype))]

    def cost(self, attrs, ins, outs):
        return Cost(0.0, float(nbytes(ins[1]) + 2 * nbytes(outs[0])))

    def gradient(self, g, node, dys, wanted):
        if dys[0] is None or not wanted[0]:
            return [None, None]
        table, ids = node.inputs
        (dtable,) = g.apply("embedding_grad", [ids, dys[0]], vocab=g.shape(table)[0])
        return [dtable, None]

    def cuda_launches(self, attrs, ins, outs):
        (v, d), n = ins[0].shape, numel(outs[0].shape)
        return [grid_stride(_kernel("embedding_fwd", outs[0].dtype, ins[1].dtype), n,
                            (OUT(0), IN(0), IN(1), i64(v), i32(d), i64(n)), OUT(0))]

    def compute(self, attrs, xs, ys):
        table, ids = xs
        _check_id_values(ids, table.shape[0])
        np.take(table, ids, axis=0, out=ys[0])


@register
class EmbeddingGrad(Op):
    """(ids[...], dy[..., D]) -> dtable[vocab, D]: row v is the sum, in position order, of
    dy's rows at the positions whose id is v (zero for ids never seen)."""
    name, arity, differentiable = "embedding_grad", 2, False
    cuda_kernels = ("embedding_bwd", "embedding_bwd_i64")

    def canon(self, attrs):
        a = check_attrs(attrs, {"vocab": None}, required=["vocab"])
        if not isinstance(a["vocab"], (int, np.integer)) or a["vocab"] < 1:
            raise OpError(f"vocab must be a positive int, got {a['vocab']!r}")
        return {"vocab": int(a["vocab"])}

    def infer(self, attrs, ins):
        ids, dy = ins
        _check_ids(ids)
        if tuple(dy.shape[:-1]) != tuple(ids.shape) or len(dy.shape) != len(ids.shape) + 1:
            raise ShapeError(f"dy must have shape {tuple(ids.shape)} + (D,), one row per id, "
                             f"got {tuple(dy.shape)}")
        require_float(dy.dtype)
        return [((attrs["vocab"], dy.shape[-1]), np.dtype(dy.dtype))]

    def cost(self, attrs, ins, outs):
        return Cost(float(numel(ins[1].shape)), float(sum(nbytes(t) for t in ins) + nbytes(outs[0])))

    def cuda_launches(self, attrs, ins, outs):
        """One block per table row; it finds its positions in order and adds their rows."""
        v, d = outs[0].shape
        return [per_block(_kernel("embedding_bwd", outs[0].dtype, ins[0].dtype), v,
                          (OUT(0), IN(0), IN(1), i64(v), i32(d), i64(numel(ins[0].shape))), OUT(0),
                          elements_per_item=d)]

    def compute(self, attrs, xs, ys):
        ids, dy = xs
        _check_id_values(ids, attrs["vocab"])
        ys[0].fill(0)
        # ufunc.at adds unbuffered, in index order: each row's sum is 0 + dy[p1] + dy[p2] + ...
        np.add.at(ys[0], ids.reshape(-1), dy.reshape(-1, dy.shape[-1]))
