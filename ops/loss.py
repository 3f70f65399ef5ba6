"""Losses over integer class labels: softmax cross-entropy, and log_softmax with nll_loss (as
PyTorch splits cross-entropy), with their gradients."""
from __future__ import annotations

import numpy as np

from .cuda_launch import IN, OUT, THREADS, WS, Coverage, Launch, grid_stride, i32, i64, kernel_name, per_block, per_row
from .registry import (Cost, Op, OpError, ShapeError, check_attrs, emit, nbytes, numel, register, require_float,
                       same_dtype)


def _check_logits_labels(scores, labels, what: str) -> tuple[int, int]:
    shape = tuple(scores.shape)
    if len(shape) != 2 or shape[0] == 0 or shape[1] == 0:
        raise ShapeError(f"{what} must be a non-empty [N,C] matrix, got shape {shape}")
    require_float(scores.dtype)
    n = shape[0]
    if tuple(labels.shape) != (n,):
        raise ShapeError(f"labels must have shape ({n},), one class index per row of {what} {shape}, "
                         f"got {tuple(labels.shape)}")
    if np.dtype(labels.dtype).kind not in "iu":
        raise ShapeError(f"labels must have an integer dtype (class indices), got {np.dtype(labels.dtype)}")
    return shape


def _check_label_values(labels: np.ndarray, classes: int) -> None:
    """Out-of-range labels would index the wrong class or crash deep inside numpy; say which one."""
    bad = np.flatnonzero((labels < 0) | (labels >= classes))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"label {int(labels[i])} at position {i} is outside [0, {classes}) "
                         f"({bad.size} of {labels.size} labels are out of range)")


def _xent_kernel(base: str, dtype, label_dtype) -> str:
    suffix = {np.dtype(np.int32): "", np.dtype(np.int64): "_i64"}.get(np.dtype(label_dtype))
    if suffix is None:
        raise OpError(f"softmax cross-entropy has CUDA kernels for int32 and int64 labels, not {label_dtype}")
    return kernel_name(base, dtype) + suffix


@register
class SoftmaxCrossEntropy(Op):
    """(logits[N,C], labels[N]) -> (loss, probs[N,C]), loss = mean over rows of -log probs[label].

    probs is kept for the gradient, so logits can be freed after the forward pass."""
    name, arity = "softmax_cross_entropy", 2
    cuda_kernels = ("softmax_xent_fwd", "softmax_xent_fwd_i64", "softmax_xent_loss")

    def infer(self, attrs, ins):
        shape = _check_logits_labels(ins[0], ins[1], "logits")
        dtype = np.dtype(ins[0].dtype)
        return [((), dtype), (shape, dtype)]

    def cost(self, attrs, ins, outs):
        # Max, subtract, exp, sum and divide per element.
        return Cost(5.0 * ins[0].shape[0] * ins[0].shape[1],
                    float(sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs)))

    def gradient(self, g, node, dys, wanted):
        if dys[1] is not None:
            raise OpError("only output 0 (the loss) of softmax_cross_entropy is differentiable; "
                          "apply a separate softmax to differentiate through probabilities")
        if dys[0] is None or not wanted[0]:
            return [None, None]
        logits_grad = emit(g, "softmax_cross_entropy_grad", [node.outputs[1], node.inputs[1], dys[0]])
        return [logits_grad, None]

    def cuda_workspaces(self, attrs, ins, outs):
        return (ins[0].shape[0] * np.dtype(ins[0].dtype).itemsize,)      # each row's loss

    def cuda_launches(self, attrs, ins, outs):
        """One block per row: probs and the row's loss; then one block sums the rows' losses."""
        (n, c), dtype = ins[0].shape, np.dtype(ins[0].dtype)
        rows = per_block(_xent_kernel("softmax_xent_fwd", dtype, ins[1].dtype), n,
                         (OUT(1), WS(0), IN(0), IN(1), i32(n), i32(c)), OUT(1), elements_per_item=c)
        total = Launch(kernel_name("softmax_xent_loss", dtype), (1, 1, 1), (THREADS, 1, 1), 0,
                       (OUT(0), WS(0), i32(n)), Coverage(OUT(0), (1,), (1,)))
        return [rows, total]

    def compute(self, attrs, xs, ys):
        logits, labels = xs
        loss, probs = ys
        n, c = logits.shape
        _check_label_values(labels, c)
        t = logits.dtype.type
        # Subtracting the row maximum keeps exp from overflowing; probs holds z = logits - max.
        np.subtract(logits, logits.max(axis=1, keepdims=True), out=probs)
        z_label = probs[np.arange(n), labels]
        np.exp(probs, out=probs)
        total = np.sum(probs, axis=1)
        probs /= total[:, None]
        # -log softmax(z)[label] = log(sum exp z) - z[label]
        loss[...] = np.sum(np.log(total) - z_label) / t(n)


@register
class SoftmaxCrossEntropyGrad(Op):
    """(probs[N,C], labels[N], dloss) -> dlogits = (probs - onehot(labels)) * (dloss / N)."""
    name, arity, differentiable = "softmax_cross_entropy_grad", 3, False
    cuda_kernels = ("softmax_xent_bwd", "softmax_xent_bwd_i64")

    def infer(self, attrs, ins):
        probs, _, dloss = ins
        shape = _check_logits_labels(probs, ins[1], "probs")
        if tuple(dloss.shape) != ():
            raise ShapeError(f"dloss must be a scalar, got shape {tuple(dloss.shape)}")
        if np.dtype(dloss.dtype) != np.dtype(probs.dtype):
            raise ShapeError(f"dloss is {np.dtype(dloss.dtype)} but probs is {np.dtype(probs.dtype)}")
        return [(shape, np.dtype(probs.dtype))]

    def cuda_launches(self, attrs, ins, outs):
        (n, c), dtype = ins[0].shape, np.dtype(ins[0].dtype)
        return [grid_stride(_xent_kernel("softmax_xent_bwd", dtype, ins[1].dtype), n * c,
                            (OUT(0), IN(0), IN(1), IN(2), i32(n), i32(c)), OUT(0))]

    def compute(self, attrs, xs, ys):
        probs, labels, dloss = xs
        dlogits = ys[0]
        n, c = probs.shape
        _check_label_values(labels, c)
        np.copyto(dlogits, probs)
        dlogits[np.arange(n), labels] -= 1
        dlogits *= dloss / probs.dtype.type(n)


# ---------------------------------------------------------------- log_softmax and nll_loss
# What an importer of PyTorch graphs meets where a model calls F.cross_entropy: aten's
# _log_softmax over the last axis, then nll_loss_forward (no class weights). The formulas
# follow PyTorch's (tools/autograd/derivatives.yaml: _log_softmax_backward_data and
# nll_loss_backward), so losses and gradients agree with it to float64 rounding.

def _check_last_axis(x, what: str) -> tuple[int, ...]:
    shape = tuple(x.shape)
    if not shape or shape[-1] == 0:
        raise ShapeError(f"{what} works over the last axis, which must be non-empty; got shape {shape}")
    require_float(x.dtype)
    return shape


@register
class LogSoftmax(Op):
    """x[..., C] -> y = log softmax(x) over the last axis, as PyTorch computes it:
    y = (x - max) - log(sum(exp(x - max)))."""
    name = "log_softmax"
    cuda_kernels = ("log_softmax_fwd",)

    def infer(self, attrs, ins):
        return [(_check_last_axis(ins[0], "log_softmax"), np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        # Max, subtract, exp, sum, log and subtract per element.
        return Cost(5.0 * numel(ins[0].shape), float(nbytes(ins[0]) + nbytes(outs[0])))

    def gradient(self, g, node, dys, wanted):
        if dys[0] is None:
            return [None]
        return [emit(g, "log_softmax_grad", [node.outputs[0], dys[0]])]

    def cuda_launches(self, attrs, ins, outs):
        """One block per row: maximum, sum of exponentials, then y."""
        return [per_row("log_softmax_fwd", outs[0].dtype, tuple(ins[0].shape), (OUT(0), IN(0)))]

    def compute(self, attrs, xs, ys):
        x, y = xs[0], ys[0]
        np.subtract(x, x.max(axis=-1, keepdims=True), out=y)
        total = np.sum(np.exp(y), axis=-1, keepdims=True)
        y -= np.log(total)


@register
class LogSoftmaxGrad(Op):
    """(y, dy) -> dx = dy - exp(y) * sum(dy) over the last axis (PyTorch's
    _log_softmax_backward_data)."""
    name, arity, differentiable = "log_softmax_grad", 2, False
    cuda_kernels = ("log_softmax_bwd",)

    def infer(self, attrs, ins):
        shape = _check_last_axis(ins[0], "log_softmax_grad")
        if tuple(ins[1].shape) != shape:
            raise ShapeError(f"dy has shape {tuple(ins[1].shape)}, y has {shape}; they must match")
        return [(shape, same_dtype(ins))]

    def cost(self, attrs, ins, outs):
        return Cost(4.0 * numel(ins[0].shape), float(sum(nbytes(t) for t in ins) + nbytes(outs[0])))

    def cuda_launches(self, attrs, ins, outs):
        """One block per row: sum of dy, then dx."""
        return [per_row("log_softmax_bwd", outs[0].dtype, tuple(ins[0].shape), (OUT(0), IN(0), IN(1)))]

    def compute(self, attrs, xs, ys):
        y, dy = xs
        total = np.sum(dy, axis=-1, keepdims=True)
        np.subtract(dy, np.exp(y) * total, out=ys[0])


REDUCTIONS = ("mean", "sum")


def _nll_attrs(attrs, allowed: dict, required=()) -> dict:
    a = check_attrs(attrs, {"ignore_index": -100, "reduction": "mean", **allowed}, required)
    if isinstance(a["ignore_index"], (bool, np.bool_)) or not isinstance(a["ignore_index"], (int, np.integer)):
        raise OpError(f"ignore_index must be an int, got {a['ignore_index']!r}")
    if a["reduction"] not in REDUCTIONS:
        raise OpError(f"reduction must be one of {REDUCTIONS}, got {a['reduction']!r}")
    a["ignore_index"] = int(a["ignore_index"])
    return a


def _check_nll_labels(labels: np.ndarray, classes: int, ignore_index: int) -> np.ndarray:
    """The rows that count (label != ignore_index); any other label outside [0, C) raises."""
    kept = labels != ignore_index
    bad = np.flatnonzero(kept & ((labels < 0) | (labels >= classes)))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"label {int(labels[i])} at position {i} is outside [0, {classes}) and is not "
                         f"ignore_index {ignore_index} ({bad.size} of {labels.size} labels are out of range)")
    return kept


def _label_kernel(base: str, dtype, label_dtype) -> str:
    suffix = {np.dtype(np.int32): "", np.dtype(np.int64): "_i64"}.get(np.dtype(label_dtype))
    if suffix is None:
        raise OpError(f"{base} has CUDA kernels for int32 and int64 labels, not {label_dtype}")
    return kernel_name(base, dtype) + suffix


@register
class NllLoss(Op):
    """(logp[N,C], labels[N]) -> loss = -sum of logp[r, labels[r]] over the rows whose label is
    not ``ignore_index``, divided by the number of those rows when ``reduction`` is "mean"
    (PyTorch's nll_loss without class weights; every row ignored gives 0/0 = NaN, as there)."""
    name, arity = "nll_loss", 2
    cuda_kernels = ("nll_loss_fwd", "nll_loss_fwd_i64")

    def canon(self, attrs):
        return _nll_attrs(attrs, {})

    def infer(self, attrs, ins):
        _check_logits_labels(ins[0], ins[1], "logp")
        return [((), np.dtype(ins[0].dtype))]

    def cost(self, attrs, ins, outs):
        n = ins[0].shape[0]
        return Cost(float(n), float(nbytes(ins[1]) + n * np.dtype(ins[0].dtype).itemsize + nbytes(outs[0])))

    def gradient(self, g, node, dys, wanted):
        if dys[0] is None or not wanted[0]:
            return [None, None]
        classes = int(g.shape(node.inputs[0])[1])
        return [emit(g, "nll_loss_grad", [node.inputs[1], dys[0]], classes=classes, **node.attrs), None]

    def cuda_launches(self, attrs, ins, outs):
        """One block: each thread sums a fixed strided subset of rows and counts them, then a
        fixed tree adds the threads' sums and counts (deterministic, no atomics)."""
        n, c = ins[0].shape
        return [Launch(_label_kernel("nll_loss_fwd", ins[0].dtype, ins[1].dtype), (1, 1, 1), (THREADS, 1, 1), 0,
                       (OUT(0), IN(0), IN(1), i32(n), i32(c), i64(attrs["ignore_index"]),
                        i32(attrs["reduction"] == "mean")),
                       Coverage(OUT(0), (1,), (1,)))]

    def compute(self, attrs, xs, ys):
        logp, labels = xs
        n, c = logp.shape
        kept = _check_nll_labels(labels, c, attrs["ignore_index"])
        rows = np.flatnonzero(kept)
        total = -np.sum(logp[rows, labels[rows]])
        if attrs["reduction"] == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):
                total = total / logp.dtype.type(rows.size)
        ys[0][...] = total


@register
class NllLossGrad(Op):
    """(labels[N], dloss) -> dlogp[N, classes]: zero except -(dloss / count) ("mean"; -dloss
    for "sum") at each kept row's label, count the rows whose label is not ``ignore_index``
    (PyTorch's nll_loss_backward without class weights)."""
    name, arity, differentiable = "nll_loss_grad", 2, False
    cuda_kernels = ("nll_loss_grad_scale", "nll_loss_grad_scale_i64", "nll_loss_bwd", "nll_loss_bwd_i64")

    def canon(self, attrs):
        a = _nll_attrs(attrs, {"classes": None}, required=["classes"])
        classes = a["classes"]
        if isinstance(classes, (bool, np.bool_)) or not isinstance(classes, (int, np.integer)) or classes < 1:
            raise OpError(f"classes must be a positive int (logp's second dimension), got {classes!r}")
        a["classes"] = int(classes)
        return a

    def infer(self, attrs, ins):
        labels, dloss = ins
        if len(labels.shape) != 1 or labels.shape[0] == 0:
            raise ShapeError(f"labels must be a non-empty vector [N], got shape {tuple(labels.shape)}")
        if np.dtype(labels.dtype).kind not in "iu":
            raise ShapeError(f"labels must have an integer dtype (class indices), got {np.dtype(labels.dtype)}")
        if tuple(dloss.shape) != ():
            raise ShapeError(f"dloss must be a scalar, got shape {tuple(dloss.shape)}")
        require_float(dloss.dtype)
        return [((labels.shape[0], attrs["classes"]), np.dtype(dloss.dtype))]

    def cuda_workspaces(self, attrs, ins, outs):
        return (np.dtype(ins[1].dtype).itemsize,)              # the value at each kept label

    def cuda_launches(self, attrs, ins, outs):
        """One block counts the kept rows and writes -(dloss / count) to scratch; then one
        thread per element of dlogp."""
        n, c = outs[0].shape
        dtype, ignore = ins[1].dtype, i64(attrs["ignore_index"])
        scale = Launch(_label_kernel("nll_loss_grad_scale", dtype, ins[0].dtype), (1, 1, 1), (THREADS, 1, 1), 0,
                       (WS(0), IN(0), IN(1), i32(n), ignore, i32(attrs["reduction"] == "mean")),
                       Coverage(WS(0), (1,), (1,)))
        fill = grid_stride(_label_kernel("nll_loss_bwd", dtype, ins[0].dtype), n * c,
                           (OUT(0), WS(0), IN(0), i32(n), i32(c), ignore), OUT(0))
        return [scale, fill]

    def compute(self, attrs, xs, ys):
        labels, dloss = xs
        dlogp = ys[0]
        kept = _check_nll_labels(labels, attrs["classes"], attrs["ignore_index"])
        rows = np.flatnonzero(kept)
        g = dloss[()]
        if attrs["reduction"] == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):
                g = g / dloss.dtype.type(rows.size)
        dlogp.fill(0)
        dlogp[rows, labels[rows]] = -g
