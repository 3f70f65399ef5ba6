"""Element-wise operators: activations and their gradients, add, multiply, scale, n-ary sum, fill."""
from __future__ import annotations

import numpy as np

from .registry import Op, OpError, ShapeError, check_attrs, emit, register, require_float, same_dtype


def _same_shape(ins):
    shapes = {tuple(t.shape) for t in ins}
    if len(shapes) != 1:
        raise ShapeError(f"inputs must have one shape, got {' vs '.join(str(s) for s in sorted(shapes))}")
    return shapes.pop()


class _Unary(Op):
    """y = f(x); its gradient operator takes (y, dy), so x can be freed after the forward pass."""

    grad_op = ""

    def infer(self, attrs, ins):
        require_float(ins[0].dtype)
        return [(tuple(ins[0].shape), np.dtype(ins[0].dtype))]

    def gradient(self, g, node, dys, wanted):
        return [emit(g, self.grad_op, [node.outputs[0], dys[0]])]


class _UnaryGrad(Op):
    arity = 2
    differentiable = False

    def infer(self, attrs, ins):
        shape = _same_shape(ins)
        return [(shape, same_dtype(ins))]


@register
class Relu(_Unary):
    name, grad_op = "relu", "relu_grad"
    cuda_kernels = ("relu_fwd",)

    def compute(self, attrs, xs, ys):
        np.maximum(xs[0], 0, out=ys[0])


@register
class ReluGrad(_UnaryGrad):
    name = "relu_grad"
    cuda_kernels = ("relu_bwd",)

    def compute(self, attrs, xs, ys):
        y, dy = xs
        np.multiply(dy, y > 0, out=ys[0])


@register
class Sigmoid(_Unary):
    name, grad_op = "sigmoid", "sigmoid_grad"
    cuda_kernels = ("sigmoid_fwd",)

    def cost(self, attrs, ins, outs):
        c = super().cost(attrs, ins, outs)
        return type(c)(4 * c.flops, c.bytes)

    def compute(self, attrs, xs, ys):
        # 1 / (1 + exp(-x)) without overflow warnings for very negative x.
        x, y = xs[0], ys[0]
        np.negative(x, out=y)
        np.clip(y, -80.0, 80.0, out=y)
        np.exp(y, out=y)
        y += 1
        np.reciprocal(y, out=y)


@register
class SigmoidGrad(_UnaryGrad):
    name = "sigmoid_grad"
    cuda_kernels = ("sigmoid_bwd",)

    def compute(self, attrs, xs, ys):
        y, dy = xs
        np.multiply(dy, y * (1 - y), out=ys[0])


@register
class Tanh(_Unary):
    name, grad_op = "tanh", "tanh_grad"
    cuda_kernels = ("tanh_fwd",)

    def compute(self, attrs, xs, ys):
        np.tanh(xs[0], out=ys[0])


@register
class TanhGrad(_UnaryGrad):
    name = "tanh_grad"
    cuda_kernels = ("tanh_bwd",)

    def compute(self, attrs, xs, ys):
        y, dy = xs
        np.multiply(dy, 1 - y * y, out=ys[0])


@register
class Add(Op):
    name, arity = "add", 2
    cuda_kernels = ("add_fwd",)

    def infer(self, attrs, ins):
        return [(_same_shape(ins), same_dtype(ins))]

    def gradient(self, g, node, dys, wanted):
        return [dys[0], dys[0]]

    def compute(self, attrs, xs, ys):
        np.add(xs[0], xs[1], out=ys[0])


@register
class Mul(Op):
    name, arity = "mul", 2
    cuda_kernels = ("mul_fwd",)

    def infer(self, attrs, ins):
        return [(_same_shape(ins), same_dtype(ins))]

    def gradient(self, g, node, dys, wanted):
        a, b = node.inputs
        return [emit(g, "mul", [dys[0], b]) if wanted[0] else None,
                emit(g, "mul", [dys[0], a]) if wanted[1] else None]

    def compute(self, attrs, xs, ys):
        np.multiply(xs[0], xs[1], out=ys[0])


@register
class Scale(Op):
    """y = factor * x, e.g. to average per-step losses."""
    name = "scale"
    cuda_kernels = ("scale_fwd",)

    def canon(self, attrs):
        a = check_attrs(attrs, {"factor": None}, required=["factor"])
        return {"factor": float(a["factor"])}

    def infer(self, attrs, ins):
        require_float(ins[0].dtype)
        return [(tuple(ins[0].shape), np.dtype(ins[0].dtype))]

    def gradient(self, g, node, dys, wanted):
        return [emit(g, "scale", [dys[0]], factor=node.attrs["factor"])]

    def compute(self, attrs, xs, ys):
        np.multiply(xs[0], xs[0].dtype.type(attrs["factor"]), out=ys[0])


@register
class SumN(Op):
    """The n-ary sum that combines gradient contributions. Operands are added left to right,
    in their fixed order, so the result does not depend on when each was produced."""
    name, arity = "sum_n", None
    cuda_kernels = ("sum_n_fwd",)

    def infer(self, attrs, ins):
        return [(_same_shape(ins), same_dtype(ins))]

    def cost(self, attrs, ins, outs):
        c = super().cost(attrs, ins, outs)
        return type(c)(c.flops * (len(ins) - 1), c.bytes)

    def gradient(self, g, node, dys, wanted):
        return [dys[0]] * len(node.inputs)

    def compute(self, attrs, xs, ys):
        y = ys[0]
        if len(xs) == 1:
            np.copyto(y, xs[0])
            return
        np.add(xs[0], xs[1], out=y)
        for x in xs[2:]:
            y += x


@register
class Fill(Op):
    """A constant tensor (the loss gradient's seed, zeros for an unused output's gradient)."""
    name, arity, differentiable = "fill", 0, False
    cuda_kernels = ("fill",)

    def canon(self, attrs):
        a = check_attrs(attrs, {"shape": None, "dtype": "float32", "value": 0.0}, required=["shape"])
        try:
            shape = tuple(int(d) for d in a["shape"])
            dtype = np.dtype(a["dtype"]).name
        except (TypeError, ValueError):
            raise OpError(f"bad shape {a['shape']!r} or dtype {a['dtype']!r}") from None
        if any(d < 0 for d in shape):
            raise OpError(f"negative dimension in shape {shape}")
        return {"shape": shape, "dtype": dtype, "value": float(a["value"])}

    def infer(self, attrs, ins):
        return [(attrs["shape"], np.dtype(attrs["dtype"]))]

    def cost(self, attrs, ins, outs):
        c = super().cost(attrs, ins, outs)
        return type(c)(0.0, c.bytes)

    def compute(self, attrs, xs, ys):
        ys[0].fill(attrs["value"])
