"""Softmax cross-entropy loss over integer class labels, and its gradient."""
from __future__ import annotations

import numpy as np

from .cuda_launch import IN, OUT, THREADS, WS, Coverage, Launch, grid_stride, i32, kernel_name, per_block
from .registry import Cost, Op, OpError, ShapeError, emit, nbytes, register, require_float


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
