"""The optimizer update: SGD with momentum and weight decay."""
from __future__ import annotations

import numpy as np

from .cuda_launch import IN, OUT, grid_stride, i64, kernel_name, scalar
from .registry import Cost, Op, OpError, ShapeError, check_attrs, nbytes, numel, register, require_float, same_dtype


@register
class SgdUpdate(Op):
    """(w, grad, m) -> (w', m'):  m' = momentum * m + grad + weight_decay * w;  w' = w - lr * m'.

    Evaluated left to right in w's dtype, with the scalars cast to it first, so that every
    backend can reproduce the same bits (a CUDA kernel must not fuse these into FMAs)."""
    name, arity, differentiable = "sgd_update", 3, False
    state_outputs = {0: 0, 1: 2}
    inplace = {0: 0, 1: 2}
    cuda_kernels = ("sgd_momentum_update",)

    def canon(self, attrs):
        a = check_attrs(attrs, {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.0})
        try:
            lr, momentum, wd = float(a["lr"]), float(a["momentum"]), float(a["weight_decay"])
        except (TypeError, ValueError):
            raise OpError(f"lr, momentum and weight_decay must be numbers, got {a!r}") from None
        if not lr >= 0:
            raise OpError(f"lr must be non-negative, got {a['lr']!r}")
        if not 0 <= momentum < 1:
            raise OpError(f"momentum must lie in [0, 1), got {a['momentum']!r}")
        if not wd >= 0:
            raise OpError(f"weight_decay must be non-negative, got {a['weight_decay']!r}")
        return {"lr": lr, "momentum": momentum, "weight_decay": wd}

    def infer(self, attrs, ins):
        shapes = [tuple(t.shape) for t in ins]
        if len(set(shapes)) != 1:
            raise ShapeError(f"w, grad and m must have one shape, got {shapes[0]}, {shapes[1]}, {shapes[2]}")
        dtype = same_dtype(ins)
        require_float(dtype)
        return [(shapes[0], dtype), (shapes[0], dtype)]

    def cost(self, attrs, ins, outs):
        return Cost(6.0 * numel(ins[0].shape), float(sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs)))

    def cuda_launches(self, attrs, ins, outs):
        dtype, n = np.dtype(outs[0].dtype), numel(outs[0].shape)
        args = (OUT(0), OUT(1), IN(0), IN(1), IN(2), scalar(dtype, attrs["lr"]), scalar(dtype, attrs["momentum"]),
                scalar(dtype, attrs["weight_decay"]), i64(n))
        return [grid_stride(kernel_name("sgd_momentum_update", dtype), n, args, OUT(0))]

    def compute(self, attrs, xs, ys):
        w, grad, m = xs
        w_next, m_next = ys
        t = w.dtype.type
        # Element-wise ufuncs only, so the outputs may even alias the inputs they replace.
        np.multiply(m, t(attrs["momentum"]), out=m_next)
        m_next += grad
        m_next += t(attrs["weight_decay"]) * w
        np.subtract(w, t(attrs["lr"]) * m_next, out=w_next)
