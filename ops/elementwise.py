"""Element-wise operators: activations and their gradients, add, multiply, scale, n-ary sum,
in-place accumulation, fill."""
from __future__ import annotations

import numpy as np

from .cuda_launch import IN, OUT, grid_stride, i32, i64, kernel_name, scalar
from .registry import Op, OpError, ShapeError, check_attrs, emit, numel, register, require_float, same_dtype


def _map_launch(op: Op, ins, outs, *extra) -> list:
    """One grid-stride launch of op's kernel: (y, inputs..., extra scalars..., n)."""
    n = numel(outs[0].shape)
    args = (OUT(0), *(IN(i) for i in range(len(ins))), *extra, i64(n))
    return [grid_stride(kernel_name(op.cuda_kernels[0], outs[0].dtype), n, args, OUT(0))]


def _in_place_attrs(attrs) -> dict:
    """The attributes of an operator whose only one is ``in_place`` (kept only when true)."""
    return {"in_place": True} if check_attrs(attrs, {"in_place": False})["in_place"] else {}


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

    def cuda_launches(self, attrs, ins, outs):
        return _map_launch(self, ins, outs)


class _UnaryGrad(Op):
    arity = 2
    differentiable = False

    def infer(self, attrs, ins):
        shape = _same_shape(ins)
        return [(shape, same_dtype(ins))]

    def cuda_launches(self, attrs, ins, outs):     # (dx, y, dy, n)
        return _map_launch(self, ins, outs)


@register
class Relu(_Unary):
    """max(x, 0); with ``in_place=True`` (inference graphs) it may overwrite x."""
    name, grad_op = "relu", "relu_grad"
    cuda_kernels = ("relu_fwd",)

    def canon(self, attrs):
        return _in_place_attrs(attrs)

    def inplace_for(self, attrs):
        return {0: 0} if attrs.get("in_place") else {}

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
    """a + b. With ``in_place=True`` the sum may be written over b (an inference graph's
    residual sum over the branch that dies there); training graphs leave it off."""
    name, arity = "add", 2
    cuda_kernels = ("add_fwd",)

    def canon(self, attrs):
        return _in_place_attrs(attrs)

    def inplace_for(self, attrs):
        return {0: 1} if attrs.get("in_place") else {}

    def infer(self, attrs, ins):
        return [(_same_shape(ins), same_dtype(ins))]

    def gradient(self, g, node, dys, wanted):
        return [dys[0], dys[0]]

    def compute(self, attrs, xs, ys):
        np.add(xs[0], xs[1], out=ys[0])

    def cuda_launches(self, attrs, ins, outs):
        return _map_launch(self, ins, outs)


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

    def cuda_launches(self, attrs, ins, outs):
        return _map_launch(self, ins, outs)


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

    def cuda_launches(self, attrs, ins, outs):
        return _map_launch(self, ins, outs, scalar(outs[0].dtype, attrs["factor"]))


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

    SLOTS = 8   # operands per launch of sum_n_fwd

    def cuda_launches(self, attrs, ins, outs):
        """Operands 0..7 in one launch, then y += the next 7 per launch (y passed as x0), so
        the sum runs left to right as in numpy. Unused pointer slots repeat the first."""
        n, name = numel(outs[0].shape), kernel_name(self.cuda_kernels[0], outs[0].dtype)
        groups = [[IN(i) for i in range(min(len(ins), self.SLOTS))]]
        for start in range(self.SLOTS, len(ins), self.SLOTS - 1):
            groups.append([OUT(0)] + [IN(i) for i in range(start, min(len(ins), start + self.SLOTS - 1))])
        launches = []
        for ops in groups:
            slots = ops + [ops[0]] * (self.SLOTS - len(ops))
            launches.append(grid_stride(name, n, (OUT(0), *slots, i32(len(ops)), i64(n)), OUT(0)))
        return launches


@register
class Accumulate(Op):
    """acc' = acc + c, written over acc when acc dies here (as an SGD update overwrites its
    parameter): the running sum of a tensor's gradient contributions takes no new memory
    per contribution. Same bits as ``add`` and as ``sum_n`` taken left to right."""
    name, arity, differentiable = "accumulate", 2, False
    cuda_kernels = ("add_fwd",)       # element by element: safe when y is acc's own memory
    inplace = {0: 0}                  # a running sum, not persisted state

    def infer(self, attrs, ins):
        return [(_same_shape(ins), same_dtype(ins))]

    def compute(self, attrs, xs, ys):
        np.add(xs[0], xs[1], out=ys[0])

    def cuda_launches(self, attrs, ins, outs):
        return _map_launch(self, ins, outs)


@register
class AccumulateState(Accumulate):
    """acc' = acc + c where acc is persisted state: gradients summed over the micro-batches of
    gradient accumulation (the training loop zeroes acc after each update or skipped one).
    The next value is declared as state, so acc persists across iterations; same bits as
    ``accumulate``."""
    name = "accumulate_state"
    state_outputs = {0: 0}
    recomputable = False


@register
class Fill(Op):
    """A constant tensor (the loss gradient's seed, zeros for an unused output's gradient)."""
    name, arity, differentiable = "fill", 0, False
    cuda_kernels = ("fill_b32", "fill_b64")

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

    def cuda_launches(self, attrs, ins, outs):
        """The value's bit pattern, written 4 or 8 bytes at a time whatever the dtype."""
        dtype = np.dtype(attrs["dtype"])
        bits_type = {4: np.uint32, 8: np.uint64}.get(dtype.itemsize)
        if bits_type is None:
            raise OpError(f"fill has CUDA kernels for 4- and 8-byte dtypes, not {dtype}")
        value = np.empty((), dtype)
        value.fill(attrs["value"])
        n = numel(outs[0].shape)
        kernel = "fill_b32" if dtype.itemsize == 4 else "fill_b64"
        return [grid_stride(kernel, n, (OUT(0), value.view(bits_type)[()], i64(n)), OUT(0))]
