"""The optimizer updates: SGD with momentum and weight decay; Adam and AdamW.

Adam keeps two state tensors per parameter (the moments m and v, each the parameter's size)
and a step count: the memory that SmartSwap and ZeRO-Offload move off the GPU."""
from __future__ import annotations

import numpy as np

from .cuda_launch import IN, OUT, THREADS, Coverage, Launch, grid_stride, i64, kernel_name, scalar
from .registry import Cost, Op, OpError, ShapeError, check_attrs, nbytes, numel, register, require_float, same_dtype


@register
class SgdUpdate(Op):
    """(w, grad, m) -> (w', m'):  m' = momentum * m + grad + weight_decay * w;  w' = w - lr * m'.

    Evaluated left to right in w's dtype, with the scalars cast to it first, so that every
    backend can reproduce the same bits (a CUDA kernel must not fuse these into FMAs)."""
    name, arity, differentiable = "sgd_update", 3, False
    state_outputs = {0: 0, 1: 2}
    recomputable = False
    gradient_input = 1
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


def _number(a: dict, key: str) -> float:
    try:
        return float(a[key])
    except (TypeError, ValueError):
        raise OpError(f"{key} must be a number, got {a[key]!r}") from None


@register
class AdamUpdate(Op):
    """(w, grad, m, v, step) -> (w', m', v', step'), step a scalar count of updates so far:

        t = step + 1;  g = grad (+ weight_decay * w unless decoupled)
        m' = beta1 * m + (1 - beta1) * g;   v' = beta2 * v + ((1 - beta2) * g) * g
        w' = w * (1 - lr * weight_decay if decoupled else 1)
             - (lr / (1 - beta1^t)) * (m' / (sqrt(v') / sqrt(1 - beta2^t) + eps))

    Adam (Kingma and Ba) with ``decoupled=False``, AdamW (Loshchilov and Hutter, as
    torch.optim.AdamW) with ``decoupled=True``. Evaluated in w's dtype, scalars cast first."""
    name, arity, differentiable = "adam_update", 5, False
    state_outputs = {0: 0, 1: 2, 2: 3, 3: 4}
    recomputable = False
    gradient_input = 1
    inplace = {0: 0, 1: 2, 2: 3, 3: 4}
    cuda_kernels = ("adam_update", "adam_step")

    def canon(self, attrs):
        a = check_attrs(attrs, {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0,
                                "decoupled": True})
        lr, b1, b2, eps, wd = (_number(a, k) for k in ("lr", "beta1", "beta2", "eps", "weight_decay"))
        if not lr >= 0:
            raise OpError(f"lr must be non-negative, got {a['lr']!r}")
        for key, b in (("beta1", b1), ("beta2", b2)):
            if not 0 <= b < 1:
                raise OpError(f"{key} must lie in [0, 1), got {a[key]!r}")
        if not eps > 0:
            raise OpError(f"eps must be positive, got {a['eps']!r}")
        if not wd >= 0:
            raise OpError(f"weight_decay must be non-negative, got {a['weight_decay']!r}")
        if not isinstance(a["decoupled"], (bool, np.bool_)):
            raise OpError(f"decoupled must be a bool, got {a['decoupled']!r}")
        return {"lr": lr, "beta1": b1, "beta2": b2, "eps": eps, "weight_decay": wd, "decoupled": bool(a["decoupled"])}

    def infer(self, attrs, ins):
        shapes = [tuple(t.shape) for t in ins[:4]]
        if len(set(shapes)) != 1:
            raise ShapeError(f"w, grad, m and v must have one shape, got {', '.join(map(str, shapes))}")
        if tuple(ins[4].shape) != ():
            raise ShapeError(f"step must be a scalar (the count of updates so far), got shape {tuple(ins[4].shape)}")
        dtype = same_dtype(ins)
        require_float(dtype)
        return [(shapes[0], dtype)] * 3 + [((), dtype)]

    def cost(self, attrs, ins, outs):
        return Cost(14.0 * numel(ins[0].shape), float(sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs)))

    def cuda_launches(self, attrs, ins, outs):
        """The element-wise update (every thread reads the old step), then step' = step + 1 by
        one thread: a second launch, so step' may overwrite step in place."""
        dtype, n = np.dtype(outs[0].dtype), numel(outs[0].shape)
        s = [scalar(dtype, attrs[k]) for k in ("lr", "beta1", "beta2", "eps", "weight_decay")]
        args = (OUT(0), OUT(1), OUT(2), IN(0), IN(1), IN(2), IN(3), IN(4), *s,
                np.int32(attrs["decoupled"]), i64(n))
        step = Launch(kernel_name("adam_step", dtype), (1, 1, 1), (THREADS, 1, 1), 0, (OUT(3), IN(4)),
                      Coverage(OUT(3), (1,), (1,)))
        return [grid_stride(kernel_name("adam_update", dtype), n, args, OUT(0)), step]

    def compute(self, attrs, xs, ys):
        w, grad, m, v, step = xs
        w_next, m_next, v_next, step_next = ys
        t = w.dtype.type
        count = step + t(1)
        lr, b1, b2, wd = (t(attrs[k]) for k in ("lr", "beta1", "beta2", "weight_decay"))
        g = grad if attrs["decoupled"] else grad + wd * w
        bc1, bc2 = t(1) - b1 ** count, t(1) - b2 ** count
        # Element-wise ufuncs, each output written after its inputs are read: outputs may
        # alias the inputs they replace.
        m_new = b1 * m + (t(1) - b1) * g
        v_new = b2 * v + ((t(1) - b2) * g) * g
        decay = t(1) - lr * wd if attrs["decoupled"] else t(1)
        update = (lr / bc1) * (m_new / (np.sqrt(v_new) / np.sqrt(bc2) + t(attrs["eps"])))
        np.subtract(w * decay, update, out=w_next)
        np.copyto(m_next, m_new)
        np.copyto(v_next, v_new)
        step_next[...] = count
