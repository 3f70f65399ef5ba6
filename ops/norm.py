"""Batch normalization (training mode) and instance normalization, and their gradients.

batch_norm is one operator; training graphs use it split in two, batch_norm_stats (the
statistics and running-statistics update, stateful) then batch_norm_apply (y, pure, so a plan
may recompute it), which together give batch_norm's bits, launches and cost."""
from __future__ import annotations

import numpy as np

from .cuda_launch import (IN, OUT, MAX_GRID_YZ, THREADS, WS, Coverage, Launch, cdiv, grid_stride, i32, i64,
                          kernel_name, per_row, scalar)
from .registry import (Cost, Op, OpError, ShapeError, check_attrs, nbytes, numel, positive_eps, register, require_float,
                       same_dtype)


def _reduce_axes(ndim: int) -> tuple[int, ...]:
    """Every axis but the channel axis 1: (0,) for [N,C], (0,2,3) for [N,C,H,W]."""
    return (0,) if ndim == 2 else (0, 2, 3)


def _per_channel(v: np.ndarray, ndim: int) -> np.ndarray:
    """A [C] vector shaped to broadcast against a [N,C] or [N,C,H,W] tensor."""
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def _values_per_channel(shape) -> int:
    return numel(shape) // shape[1]


def _layout(shape) -> tuple[int, int, int]:
    """(C, HW, m): channels, values per (sample, channel), values per channel."""
    c = shape[1]
    hw = shape[2] * shape[3] if len(shape) == 4 else 1
    return c, hw, shape[0] * hw


def _splits(c: int, m: int) -> int:
    """Blocks per channel for the statistics: about 512 blocks in all, each at least 4096 values."""
    return max(1, min(cdiv(512, c), cdiv(m, 4096)))


def _partial(dtype, c, hw, m, s, mode, x, dy, mean, invstd) -> Launch:
    """batch_norm_partial: an (s splits) x (c channels) grid of channel-chunk sums into WS(0)."""
    if c > MAX_GRID_YZ:
        raise OpError(f"batch_norm's CUDA kernels handle at most {MAX_GRID_YZ} channels, got {c}")
    args = (WS(0), x, dy, mean, invstd, i32(c), i32(hw), i64(m), i32(s), i32(mode))
    return Launch(kernel_name("batch_norm_partial", dtype), (s, c, 1), (THREADS, 1, 1), 0, args,
                  Coverage(WS(0), (s, c), (1, 1), 2 if mode == 2 else 1))


def _canon_statistics(attrs, extra=None) -> dict:
    """eps and momentum, checked (batch_norm and batch_norm_stats)."""
    a = check_attrs(attrs, {"eps": 1e-5, "momentum": 0.9, **(extra or {})})
    eps, momentum = float(a["eps"]), float(a["momentum"])
    if not eps > 0:
        raise OpError(f"eps must be positive, got {a['eps']!r}")
    if not 0 <= momentum <= 1:
        raise OpError(f"momentum must lie in [0, 1], got {a['momentum']!r}")
    return {**a, "eps": eps, "momentum": momentum}


def _check_x(x, batch_statistics: bool) -> tuple:
    """x's shape, once it is [N,C] or [N,C,H,W] floats (with 2+ values a channel for statistics)."""
    shape = tuple(x.shape)
    if len(shape) not in (2, 4):
        raise ShapeError(f"x must be [N,C] or [N,C,H,W], got shape {shape}")
    require_float(x.dtype)
    if batch_statistics and _values_per_channel(shape) < 2:
        raise ShapeError(f"x of shape {shape} has fewer than 2 values per channel; "
                         "batch statistics need a larger batch or spatial size")
    return shape


def _check_per_channel(shape, named) -> None:
    """Every (name, tensor) in ``named`` is a [C] vector for x of ``shape``."""
    c = shape[1]
    for what, t in named:
        if tuple(t.shape) != (c,):
            raise ShapeError(f"{what} must have shape ({c},) for x of shape {shape}, got {tuple(t.shape)}")


def _statistics_launches(attrs, dtype, shape, x, running_mean, running_var, mean, invstd, mean_next,
                         var_next) -> list[Launch]:
    """Sum of x (two-stage) -> mean; sum of squared deviations -> invstd and the running
    statistics. Arguments are references (IN(i), OUT(i)) of the operator launching them."""
    c, hw, m = _layout(shape)
    s = _splits(c, m)
    return [
        _partial(dtype, c, hw, m, s, 0, x, x, x, x),
        grid_stride(kernel_name("batch_norm_mean", dtype), c, (mean, WS(0), i32(c), i32(s), i64(m)), mean),
        _partial(dtype, c, hw, m, s, 1, x, x, mean, x),
        grid_stride(kernel_name("batch_norm_finalize", dtype), c,
                    (invstd, mean_next, var_next, WS(0), mean, running_mean, running_var, i32(c), i32(s), i64(m),
                     scalar(dtype, attrs["eps"]), scalar(dtype, attrs["momentum"])), invstd),
    ]


def _normalize_launch(dtype, shape, y, x, mean, invstd, gamma, beta) -> Launch:
    """y = (x - mean) * (invstd * gamma) + beta, one thread per element (references as above)."""
    c, hw, _ = _layout(shape)
    total = numel(shape)
    return grid_stride(kernel_name("batch_norm_fwd", dtype), total,
                       (y, x, mean, invstd, gamma, beta, i32(c), i32(hw), i64(total)), y)


def _statistics_workspaces(x) -> tuple[int, ...]:
    c, _, m = _layout(x.shape)
    return (c * _splits(c, m) * np.dtype(x.dtype).itemsize,)


# batch_norm's cost, split at its two passes: the statistics (a pass summing x, then one summing
# squared deviations: 4 flops a value) and the normalizing pass (3 flops a value), each reading x once.
STATISTICS_FLOPS, NORMALIZE_FLOPS = 4.0, 3.0


@register
class BatchNorm(Op):
    """(x, gamma, beta, running_mean, running_var) -> (y, mean, invstd, running_mean', running_var').

    Normalizes with the batch's own statistics (biased variance); mean and invstd are
    saved for the gradient. The running statistics move towards the batch's, using the
    unbiased variance as MXNet and PyTorch do."""
    name, arity = "batch_norm", 5
    state_outputs = {3: 3, 4: 4}
    recomputable = False
    inplace = {3: 3, 4: 4}
    cuda_kernels = ("batch_norm_partial", "batch_norm_mean", "batch_norm_finalize", "batch_norm_fwd")

    def canon(self, attrs):
        a = _canon_statistics(attrs, {"in_place": False})
        return {"eps": a["eps"], "momentum": a["momentum"], **({"in_place": True} if a["in_place"] else {})}

    def inplace_for(self, attrs):
        """With ``in_place=True`` (inference graphs: nothing differentiates it) y may overwrite x:
        the statistics are taken before y is written, and y[i] reads only x[i]."""
        return {0: 0, **self.inplace} if attrs.get("in_place") else self.inplace

    def infer(self, attrs, ins):
        shape = _check_x(ins[0], batch_statistics=True)
        dtype = same_dtype(ins)
        _check_per_channel(shape, zip(("gamma", "beta", "running_mean", "running_var"), ins[1:]))
        return [(shape, dtype)] + [((shape[1],), dtype)] * 4

    def cost(self, attrs, ins, outs):
        # A statistics pass (mean, then squared deviations) and a normalizing pass, each reading x.
        moved = sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs) + nbytes(ins[0])
        return Cost((STATISTICS_FLOPS + NORMALIZE_FLOPS) * numel(ins[0].shape), float(moved))

    def gradient(self, g, node, dys, wanted):
        if any(d is not None for d in dys[1:]):
            raise OpError("only output 0 (y) of batch_norm is differentiable; "
                          "its statistics outputs cannot carry a gradient")
        if dys[0] is None:
            return [None] * 5
        x, gamma = node.inputs[:2]
        _, mean, invstd = node.outputs[:3]
        dx, dgamma, dbeta = g.apply("batch_norm_grad", [x, gamma, mean, invstd, dys[0]])
        return [dx if wanted[0] else None, dgamma if wanted[1] else None,
                dbeta if wanted[2] else None, None, None]

    def cuda_workspaces(self, attrs, ins, outs):
        return _statistics_workspaces(ins[0])

    def cuda_launches(self, attrs, ins, outs):
        """The statistics (batch_norm_stats' launches), then y (batch_norm_apply's).
        Outputs: y, mean, invstd, running_mean', running_var'."""
        dtype, shape = outs[0].dtype, ins[0].shape
        return (_statistics_launches(attrs, dtype, shape, IN(0), IN(3), IN(4), OUT(1), OUT(2), OUT(3), OUT(4))
                + [_normalize_launch(dtype, shape, OUT(0), IN(0), OUT(1), OUT(2), IN(1), IN(2))])

    def compute(self, attrs, xs, ys):
        x, gamma, beta, running_mean, running_var = xs
        y, mean, invstd, mean_next, var_next = ys
        centered = _batch_statistics(attrs, x, running_mean, running_var, mean, invstd, mean_next, var_next)
        nd = x.ndim
        np.multiply(centered, _per_channel(invstd * gamma, nd), out=y)
        y += _per_channel(beta, nd)


def _batch_statistics(attrs, x, running_mean, running_var, mean, invstd, mean_next, var_next):
    """Training-mode batch norm's statistics into mean, invstd and the running statistics' next
    values (batch_norm's and batch_norm_stats' one computation: the same bits); x - mean."""
    t = x.dtype.type
    axes, nd = _reduce_axes(x.ndim), x.ndim
    m = _values_per_channel(x.shape)
    np.divide(np.sum(x, axis=axes), t(m), out=mean)
    centered = x - _per_channel(mean, nd)
    var = np.sum(centered * centered, axis=axes) / t(m)
    np.divide(t(1), np.sqrt(var + t(attrs["eps"])), out=invstd)
    mom = t(attrs["momentum"])
    np.add(mom * running_mean, (t(1) - mom) * mean, out=mean_next)
    np.add(mom * running_var, (t(1) - mom) * (var * (t(m) / t(m - 1))), out=var_next)
    return centered


@register
class BatchNormStats(Op):
    """(x, running_mean, running_var) -> (mean, invstd, running_mean', running_var'): the first
    half of training-mode batch norm, split from batch_norm so that y comes from a node a plan
    may recompute (batch_norm_apply). batch_norm's statistics and running-statistics update,
    bit for bit; not recomputable (running it again would move the running statistics twice).

    Its outputs carry no gradient of their own: batch_norm_apply's gradient is batch norm's
    whole gradient, the part through these statistics included."""
    name, arity = "batch_norm_stats", 3
    state_outputs = {2: 1, 3: 2}
    recomputable = False
    inplace = {2: 1, 3: 2}
    cuda_kernels = ("batch_norm_partial", "batch_norm_mean", "batch_norm_finalize")

    def canon(self, attrs):
        return _canon_statistics(attrs)

    def infer(self, attrs, ins):
        shape = _check_x(ins[0], batch_statistics=True)
        dtype = same_dtype(ins)
        _check_per_channel(shape, zip(("running_mean", "running_var"), ins[1:]))
        return [((shape[1],), dtype)] * 4

    def cost(self, attrs, ins, outs):
        # batch_norm's but for its normalizing pass (batch_norm_apply's cost): x read once.
        moved = sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs)
        return Cost(STATISTICS_FLOPS * numel(ins[0].shape), float(moved))

    def gradient(self, g, node, dys, wanted):
        if any(d is not None for d in dys):
            raise OpError("batch_norm_stats' outputs carry no gradient: batch_norm_apply's gradient is batch "
                          "norm's whole gradient, through the statistics too; read mean and invstd only there")
        return [None] * 3

    def cuda_workspaces(self, attrs, ins, outs):
        return _statistics_workspaces(ins[0])

    def cuda_launches(self, attrs, ins, outs):
        return _statistics_launches(attrs, outs[0].dtype, ins[0].shape, IN(0), IN(1), IN(2),
                                    OUT(0), OUT(1), OUT(2), OUT(3))

    def compute(self, attrs, xs, ys):
        x, running_mean, running_var = xs
        _batch_statistics(attrs, x, running_mean, running_var, *ys)


@register
class BatchNormApply(Op):
    """(x, gamma, beta, mean, invstd) -> y = (x - mean) * (invstd * gamma) + beta, per channel:
    the second half of training-mode batch norm. Pure, so a plan may recompute y.

    Its gradient is batch_norm_grad: batch norm's WHOLE gradient with respect to x, the part
    through the batch statistics included, and none for mean and invstd. That is right only
    because mean and invstd are the batch statistics of this same x, outputs of a
    batch_norm_stats reading it: zoo.layers.batch_norm pairs them so. The shape rule sees
    tensors, not their producers, so it cannot check the pairing; apply it to other
    statistics and its gradient is wrong."""
    name, arity = "batch_norm_apply", 5
    cuda_kernels = ("batch_norm_fwd",)

    def infer(self, attrs, ins):
        shape = _check_x(ins[0], batch_statistics=False)
        dtype = same_dtype(ins)
        _check_per_channel(shape, zip(("gamma", "beta", "mean", "invstd"), ins[1:]))
        return [(shape, dtype)]

    def cost(self, attrs, ins, outs):
        # batch_norm's normalizing pass: x, gamma and beta read, y written. mean and invstd are
        # not counted: batch_norm's cost counts them once, as batch_norm_stats' outputs.
        moved = sum(nbytes(t) for t in ins[:3]) + nbytes(outs[0])
        return Cost(NORMALIZE_FLOPS * numel(ins[0].shape), float(moved))

    def gradient(self, g, node, dys, wanted):
        x, gamma, _, mean, invstd = node.inputs
        dx, dgamma, dbeta = g.apply("batch_norm_grad", [x, gamma, mean, invstd, dys[0]])
        return [dx if wanted[0] else None, dgamma if wanted[1] else None,
                dbeta if wanted[2] else None, None, None]

    def cuda_launches(self, attrs, ins, outs):
        return [_normalize_launch(outs[0].dtype, ins[0].shape, OUT(0), IN(0), IN(3), IN(4), IN(1), IN(2))]

    def compute(self, attrs, xs, ys):
        # batch_norm.compute's normalizing pass, operation for operation (the same bits).
        x, gamma, beta, mean, invstd = xs
        (y,) = ys
        nd = x.ndim
        centered = x - _per_channel(mean, nd)
        np.multiply(centered, _per_channel(invstd * gamma, nd), out=y)
        y += _per_channel(beta, nd)


@register
class BatchNormGrad(Op):
    """(x, gamma, mean, invstd, dy) -> (dx, dgamma, dbeta) for training-mode batch_norm."""
    name, arity, differentiable = "batch_norm_grad", 5, False
    cuda_kernels = ("batch_norm_partial", "batch_norm_bwd_reduce", "batch_norm_bwd_data")

    def infer(self, attrs, ins):
        x, gamma, mean, invstd, dy = ins
        shape = tuple(x.shape)
        if len(shape) not in (2, 4):
            raise ShapeError(f"x must be [N,C] or [N,C,H,W], got shape {shape}")
        if tuple(dy.shape) != shape:
            raise ShapeError(f"dy has shape {tuple(dy.shape)}, x has {shape}; they must match")
        c = shape[1]
        for what, t in (("gamma", gamma), ("mean", mean), ("invstd", invstd)):
            if tuple(t.shape) != (c,):
                raise ShapeError(f"{what} must have shape ({c},) for x of shape {shape}, got {tuple(t.shape)}")
        dtype = same_dtype(ins)
        return [(shape, dtype), ((c,), dtype), ((c,), dtype)]

    def cost(self, attrs, ins, outs):
        # A reduction pass over (x, dy) and a pass writing dx that reads them again.
        moved = sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs) + 2 * nbytes(ins[0])
        return Cost(9.0 * numel(ins[0].shape), float(moved))

    def cuda_workspaces(self, attrs, ins, outs):
        c, _, m = _layout(ins[0].shape)
        return (2 * c * _splits(c, m) * np.dtype(ins[0].dtype).itemsize,)

    def cuda_launches(self, attrs, ins, outs):
        """Sums of dy and dy*xhat (two-stage) -> dbeta, dgamma; then dx."""
        dtype = outs[0].dtype
        c, hw, m = _layout(ins[0].shape)
        s, total = _splits(c, m), numel(ins[0].shape)
        return [
            _partial(dtype, c, hw, m, s, 2, IN(0), IN(4), IN(2), IN(3)),
            grid_stride(kernel_name("batch_norm_bwd_reduce", dtype), c, (OUT(1), OUT(2), WS(0), i32(c), i32(s)),
                        OUT(1)),
            grid_stride(kernel_name("batch_norm_bwd_data", dtype), total,
                        (OUT(0), IN(0), IN(4), IN(2), IN(3), IN(1), OUT(1), OUT(2), i32(c), i32(hw), i64(total),
                         i64(m)), OUT(0)),
        ]

    def compute(self, attrs, xs, ys):
        x, gamma, mean, invstd, dy = xs
        dx, dgamma, dbeta = ys
        t = x.dtype.type
        axes, nd = _reduce_axes(x.ndim), x.ndim
        m = t(_values_per_channel(x.shape))
        xhat = (x - _per_channel(mean, nd)) * _per_channel(invstd, nd)
        np.sum(dy, axis=axes, out=dbeta)
        np.sum(dy * xhat, axis=axes, out=dgamma)
        # dx = gamma * invstd / m * (m * dy - dbeta - xhat * dgamma)
        inner = m * dy - _per_channel(dbeta, nd) - xhat * _per_channel(dgamma, nd)
        np.multiply(inner, _per_channel(gamma * invstd / m, nd), out=dx)


# ------------------------------------------------------------------ instance normalization
# A fused operator rather than one composed of reductions and element-wise operators: composed,
# the planner would see x - mean, its square and the normalized x as activations the backward
# pass keeps (three tensors of x's size per layer). Fused, it keeps y and a [N,C] invstd: y is
# x normalized (no affine parameters), all the gradient needs, where PyTorch's InstanceNorm2d
# keeps x and its mean and invstd: the same bytes, one tensor of x's size and two small ones.

def _planes(shape) -> tuple[int, int, int]:
    """[N,C,H,W] as (N, C, H*W): one row of statistics per (sample, channel)."""
    n, c, h, w = shape
    return n, c, h * w


@register
class InstanceNorm(Op):
    """x[N,C,H,W] -> (y, invstd[N,C]): each (sample, channel) plane normalized by its own mean
    and biased variance, y = (x - mean) * invstd, invstd = 1/sqrt(var + eps); no affine
    parameters and no running statistics (PyTorch's InstanceNorm2d defaults, Pix2PixHD's)."""
    name = "instance_norm"
    cuda_kernels = ("instance_norm_fwd",)

    def canon(self, attrs):
        return positive_eps(attrs)

    def infer(self, attrs, ins):
        shape = tuple(ins[0].shape)
        if len(shape) != 4 or shape[2] * shape[3] == 0:
            raise ShapeError(f"instance_norm: x must be [N,C,H,W] with at least one pixel, got shape {shape}")
        require_float(ins[0].dtype)
        dtype = np.dtype(ins[0].dtype)
        return [(shape, dtype), (shape[:2], dtype)]

    def cost(self, attrs, ins, outs):
        return Cost(6.0 * numel(ins[0].shape), 2.0 * nbytes(ins[0]) + nbytes(outs[0]) + nbytes(outs[1]))

    def gradient(self, g, node, dys, wanted):
        if dys[1] is not None:
            raise OpError("only output 0 (y) of instance_norm is differentiable; its statistics are not")
        if dys[0] is None or not wanted[0]:
            return [None]
        y, invstd = node.outputs
        return [g.apply("instance_norm_grad", [y, invstd, dys[0]])[0]]

    def cuda_launches(self, attrs, ins, outs):
        """One block per plane: the mean, the squared deviations' sum, then y."""
        return [per_row("instance_norm_fwd", outs[0].dtype, _planes(ins[0].shape),
                            (OUT(0), OUT(1), IN(0), scalar(outs[0].dtype, attrs["eps"])))]

    def compute(self, attrs, xs, ys):
        x = xs[0]
        y, invstd = ys
        t = x.dtype.type
        d = t(x.shape[2] * x.shape[3])
        mean = np.sum(x, axis=(2, 3)) / d
        centered = x - mean[:, :, None, None]
        var = np.sum(centered * centered, axis=(2, 3)) / d
        np.divide(t(1), np.sqrt(var + t(attrs["eps"])), out=invstd)
        np.multiply(centered, invstd[:, :, None, None], out=y)


@register
class InstanceNormGrad(Op):
    """(y, invstd, dy) -> dx = invstd / D * (D * dy - sum(dy) - y * sum(dy * y)) per plane of D
    pixels (y is the normalized x)."""
    name, arity, differentiable = "instance_norm_grad", 3, False
    cuda_kernels = ("instance_norm_bwd",)

    def infer(self, attrs, ins):
        y, invstd, dy = ins
        shape = tuple(y.shape)
        if len(shape) != 4 or tuple(dy.shape) != shape or tuple(invstd.shape) != shape[:2]:
            raise ShapeError(f"instance_norm_grad: y and dy must be one [N,C,H,W] shape and invstd [N,C], got "
                             f"{shape}, {tuple(dy.shape)} and {tuple(invstd.shape)}")
        return [(shape, same_dtype(ins))]

    def cost(self, attrs, ins, outs):
        return Cost(8.0 * numel(ins[0].shape), 2.0 * (nbytes(ins[0]) + nbytes(ins[2])) + nbytes(outs[0]))

    def cuda_launches(self, attrs, ins, outs):
        return [per_row("instance_norm_bwd", outs[0].dtype, _planes(ins[0].shape),
                            (OUT(0), IN(0), IN(1), IN(2)))]

    def compute(self, attrs, xs, ys):
        y, invstd, dy = xs
        t = y.dtype.type
        d = t(y.shape[2] * y.shape[3])
        inner = d * dy - np.sum(dy, axis=(2, 3), keepdims=True) - y * np.sum(dy * y, axis=(2, 3), keepdims=True)
        np.multiply(inner, (invstd / d)[:, :, None, None], out=ys[0])
