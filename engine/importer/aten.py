"""Core ATen operators as ours: one converter per operator overload, in ``CONVERTERS``.

A converter reads its FX node's arguments (``Converter.tensor`` for tensors, literals as they
are), emits our operators and returns the node's value: a tensor id, a tuple of them for an
operator with several outputs, or a ``LazyTranspose`` (a permute of the last two axes that a
matrix product reads with a transpose flag). Argument positions and defaults follow the
operator schemas (native_functions.yaml). What is refused says why in one line.

docs/importing.md lists what is covered; a test checks that it lists every key here.
"""
from __future__ import annotations


from .convert import Converter, LazyTranspose, Unusable

CONVERTERS: dict = {}


def converts(*names: str):
    def register(fn):
        for name in names:
            CONVERTERS[name] = fn
        return fn
    return register


def arg(n, i: int, name: str, default=None):
    """Argument ``name`` at position ``i`` of node ``n`` (positional or keyword), or its default."""
    if len(n.args) > i:
        return n.args[i]
    return n.kwargs.get(name, default)


def _axes(dims, rank: int) -> tuple[int, ...]:
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return tuple(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return tuple(sorted({d % rank for d in dims}))


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _scalar_of(c: Converter, x):
    """A Python number for a literal or a one-element constant, else None."""
    if _is_number(x):
        return float(x)
    v = c.const_value(x) if hasattr(x, "op") else None
    if v is not None and hasattr(v, "numel") and v.numel() == 1 and v.dtype.is_floating_point:
        return float(v.item())
    if _is_number(v):
        return float(v)
    return None


# ---------------------------------------------------------------- views and copies

@converts("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.squeeze.dims",
          "aten.squeeze.dim", "aten.squeeze.default", "aten.unsqueeze.default", "aten.flatten.using_ints")
def reshape(c: Converter, n):
    x = c.tensor(n.args[0])
    shape = c.shape()
    if c.g.shape(x) == shape:
        return x
    return c.apply("reshape", [x], shape=shape)


@converts("aten.clone.default", "aten.alias.default", "aten.lift_fresh_copy.default", "aten.contiguous.default")
def identity(c: Converter, n):
    return c.tensor(n.args[0])


@converts("aten._to_copy.default")
def to_copy(c: Converter, n):
    x = c.tensor(n.args[0])
    dtype = c.dtype()
    if c.g.dtype(x).name == dtype:
        return x
    return c.apply("cast", [x], dtype=dtype)


@converts("aten.permute.default")
def permute(c: Converter, n):
    x = c.tensor(n.args[0])
    rank = len(c.g.shape(x))
    axes = tuple(d % rank for d in n.args[1])
    if axes == tuple(range(rank)):
        return x
    swaps_last_two = rank >= 2 and axes == tuple(range(rank - 2)) + (rank - 1, rank - 2)
    readers_multiply = all(_reads_as_matrix(u, n) for u in n.users)
    if swaps_last_two and readers_multiply and rank <= 3:
        return LazyTranspose(x, axes)
    return c.apply("transpose", [x], axes=axes)


@converts("aten.t.default")
def t(c: Converter, n):
    x = c.tensor(n.args[0])
    if len(c.g.shape(x)) < 2:
        return x
    return LazyTranspose(x, (1, 0)) if all(_reads_as_matrix(u, n) for u in n.users) else \
        c.apply("transpose", [x], axes=(1, 0))


def _reads_as_matrix(user, n) -> bool:
    """Whether ``user`` reads ``n`` only as an operand of a matrix product."""
    from .convert import target_name

    name = target_name(user)
    if name in ("aten.mm.default", "aten.bmm.default"):
        return n in user.args[:2] and n not in user.kwargs.values()
    if name == "aten.addmm.default":
        return n in user.args[1:3] and user.args[0] is not n
    return False


@converts("aten.expand.default")
def expand(c: Converter, n):
    x = c.tensor(n.args[0])
    shape = c.shape()
    if c.g.shape(x) == shape:
        return x
    return c.apply("broadcast_to", [x], shape=shape)


@converts("aten.cat.default")
def cat(c: Converter, n):
    parts = [c.tensor(a) for a in n.args[0]]
    parts = [p for p in parts if c.g.shape(p) != (0,)]     # torch's legacy empty tensors join nothing
    if len(parts) == 1:
        return parts[0]
    return c.apply("concat", parts, axis=arg(n, 1, "dim", 0))


@converts("aten.split_with_sizes.default")
def split_with_sizes(c: Converter, n):
    x = c.tensor(n.args[0])
    return _split(c, x, list(n.args[1]), arg(n, 2, "dim", 0))


@converts("aten.split.Tensor")
def split(c: Converter, n):
    x = c.tensor(n.args[0])
    axis = arg(n, 2, "dim", 0)
    size, length = n.args[1], c.g.shape(x)[axis]
    return _split(c, x, [min(size, length - s) for s in range(0, length, size)], axis)


def _split(c: Converter, x: int, sizes: list[int], axis: int):
    if len(sizes) == 1:
        return (x,)
    outs = c.apply("split", [x], axis=axis, sizes=tuple(sizes))
    return outs if isinstance(outs, tuple) else (outs,)


@converts("aten.slice.Tensor")
def slice_(c: Converter, n):
    x = c.tensor(n.args[0])
    shape = c.g.shape(x)
    axis = arg(n, 1, "dim", 0) % len(shape)
    start, stop, step = arg(n, 2, "start"), arg(n, 3, "end"), arg(n, 4, "step", 1)
    start, stop, _ = slice(start, stop, step).indices(shape[axis])
    if (start, stop, step) == (0, shape[axis], 1):
        return x
    return c.apply("slice", [x], axis=axis, start=start, stop=max(start, stop), step=step)


@converts("aten.select.int")
def select(c: Converter, n):
    x = c.tensor(n.args[0])
    shape = c.g.shape(x)
    axis, index = n.args[1] % len(shape), n.args[2] % c.g.shape(x)[n.args[1] % len(shape)]
    piece = c.apply("slice", [x], axis=axis, start=index, stop=index + 1, step=1)
    return c.apply("reshape", [piece], shape=c.shape())


@converts("getitem")
def getitem(c: Converter, n):
    return c.value(n.args[0])[n.args[1]]


@converts("aten._assert_tensor_metadata.default")
def assertion(c: Converter, n):
    return Unusable("an assertion's result")


# ---------------------------------------------------------------- element-wise

UNARY = {"neg": "neg", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "sin": "sin", "cos": "cos",
         "abs": "abs", "reciprocal": "reciprocal", "silu": "silu"}
OURS = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh"}


def _unary(fn: str):
    def convert(c: Converter, n):
        return c.apply("unary", [c.tensor(n.args[0])], fn=fn)
    return convert


def _ours(op: str):
    def convert(c: Converter, n):
        return c.apply(op, [c.tensor(n.args[0])])
    return convert


for _name, _fn in UNARY.items():
    CONVERTERS[f"aten.{_name}.default"] = _unary(_fn)
for _name, _op in OURS.items():
    CONVERTERS[f"aten.{_name}.default"] = _ours(_op)


@converts("aten.gelu.default")
def gelu(c: Converter, n):
    approximate = arg(n, 1, "approximate", "none")
    x = c.tensor(n.args[0])
    return c.apply("gelu", [x]) if approximate == "tanh" else c.apply("gelu", [x], approximate="none")


SAME_SHAPE = {"add": "add", "mul": "mul"}


def _binary(fn: str, scalar_fn: str | None = None, reverse_scalar_fn: str | None = None):
    """a fn b: ``binary`` for two tensors, ``scalar`` when either side is a number (or a
    one-element constant), with add/sub's ``alpha`` applied to b first."""
    def convert(c: Converter, n):
        a, b = n.args[0], n.args[1]
        alpha = n.kwargs.get("alpha", 1)
        if alpha != 1:
            if fn not in ("add", "sub"):
                raise c.refuse("alpha is only defined for add and sub")
            sb = _scalar_of(c, b)
            if sb is None:
                b_id = c.apply("scalar", [c.tensor(b)], fn="mul", value=float(alpha))
                return c.apply("binary", [c.tensor(a), b_id], fn=fn)
            b = sb * alpha
        sb = _scalar_of(c, b)
        if sb is not None and hasattr(a, "op"):
            return c.apply("scalar", [c.tensor(a)], fn=scalar_fn or fn, value=sb)
        sa = _scalar_of(c, a)
        if sa is not None and hasattr(b, "op") and reverse_scalar_fn:
            return c.apply("scalar", [c.tensor(b)], fn=reverse_scalar_fn, value=sa)
        ta, tb = _same_dtype(c, a, b)
        if fn in SAME_SHAPE and c.g.shape(ta) == c.g.shape(tb):
            return c.apply(SAME_SHAPE[fn], [ta, tb])        # the zoo's own operators
        return c.apply("binary", [ta, tb], fn=fn)
    return convert


def _same_dtype(c: Converter, a, b) -> tuple[int, int]:
    """Both operands as tensors of one dtype: a constant takes the other side's dtype; two
    computed tensors of different dtypes are refused (PyTorch would promote)."""
    ta, tb = c.tensor(a), c.tensor(b)
    da, db = c.g.dtype(ta), c.g.dtype(tb)
    if da == db:
        return ta, tb
    out = c.dtype()
    for side, t in ((a, ta), (b, tb)):
        if c.g.dtype(t).name != out and c.const_value(side) is None:
            raise c.refuse(f"its operands are {da} and {db}; cast them to one dtype in the model")
    return tuple(t if c.g.dtype(t).name == out else c.apply("cast", [t], dtype=out) for t in (ta, tb))


CONVERTERS["aten.add.Tensor"] = CONVERTERS["aten.add.Scalar"] = _binary("add", reverse_scalar_fn="add")
CONVERTERS["aten.sub.Tensor"] = CONVERTERS["aten.sub.Scalar"] = _binary("sub", reverse_scalar_fn="rsub")
CONVERTERS["aten.mul.Tensor"] = CONVERTERS["aten.mul.Scalar"] = _binary("mul", reverse_scalar_fn="mul")
CONVERTERS["aten.div.Tensor"] = CONVERTERS["aten.div.Scalar"] = _binary("div")
CONVERTERS["aten.maximum.default"] = _binary("maximum", reverse_scalar_fn="maximum")
CONVERTERS["aten.minimum.default"] = _binary("minimum", reverse_scalar_fn="minimum")


@converts("aten.rsub.Scalar")
def rsub(c: Converter, n):
    alpha = n.kwargs.get("alpha", arg(n, 2, "alpha", 1))
    x = c.tensor(n.args[0])
    if alpha != 1:
        x = c.apply("scalar", [x], fn="mul", value=float(alpha))
    return c.apply("scalar", [x], fn="rsub", value=float(n.args[1]))


@converts("aten.pow.Tensor_Scalar")
def pow_(c: Converter, n):
    return c.apply("scalar", [c.tensor(n.args[0])], fn="pow", value=float(n.args[1]))


@converts("aten.clamp_min.default")
def clamp_min(c: Converter, n):
    return c.apply("scalar", [c.tensor(n.args[0])], fn="maximum", value=float(n.args[1]))


@converts("aten.clamp_max.default")
def clamp_max(c: Converter, n):
    return c.apply("scalar", [c.tensor(n.args[0])], fn="minimum", value=float(n.args[1]))


@converts("aten.clamp.default")
def clamp(c: Converter, n):
    y = c.tensor(n.args[0])
    low, high = arg(n, 1, "min"), arg(n, 2, "max")
    if low is not None:
        y = c.apply("scalar", [y], fn="maximum", value=float(low))
    if high is not None:
        y = c.apply("scalar", [y], fn="minimum", value=float(high))
    return y


@converts("aten.where.self")
def where(c: Converter, n):
    cond = c.tensor(n.args[0])
    if c.g.dtype(cond).name != "bool":
        raise c.refuse(f"its condition is {c.g.dtype(cond)}, not bool")
    a, b = _same_dtype(c, n.args[1], n.args[2])
    return c.apply("where", [cond, a, b])


# ---------------------------------------------------------------- comparisons and logic (bool results)

COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


def _compare(fn: str):
    def convert(c: Converter, n):
        a, b = n.args[0], n.args[1]
        sb = b if _is_number(b) or isinstance(b, bool) else None
        if sb is not None:
            return c.apply("compare_scalar", [c.tensor(a)], fn=fn, value=sb)
        ta, tb = c.tensor(a), c.tensor(b)
        if c.g.dtype(ta) != c.g.dtype(tb):
            ta, tb = _cast_constant_side(c, a, b, ta, tb)
        return c.apply("compare", [ta, tb], fn=fn)
    return convert


def _cast_constant_side(c: Converter, a, b, ta: int, tb: int) -> tuple[int, int]:
    """Two operands of different dtypes: the constant one takes the other's dtype."""
    if c.const_value(b) is not None:
        return ta, c.apply("cast", [tb], dtype=c.g.dtype(ta).name)
    if c.const_value(a) is not None:
        return c.apply("cast", [ta], dtype=c.g.dtype(tb).name), tb
    raise c.refuse(f"its operands are {c.g.dtype(ta)} and {c.g.dtype(tb)}; cast them to one dtype in the model")


for _fn in COMPARISONS:
    CONVERTERS[f"aten.{_fn}.Scalar"] = CONVERTERS[f"aten.{_fn}.Tensor"] = _compare(_fn)


def _logical(fn: str):
    def convert(c: Converter, n):
        a, b = c.tensor(n.args[0]), c.tensor(n.args[1])
        for t in (a, b):
            if c.g.dtype(t).name != "bool":
                raise c.refuse(f"logical {fn} of a {c.g.dtype(t)} tensor is supported only on bool")
        return c.apply("logical", [a, b], fn=fn)
    return convert


for _fn in ("and", "or", "xor"):
    CONVERTERS[f"aten.logical_{_fn}.default"] = CONVERTERS[f"aten.bitwise_{_fn}.Tensor"] = _logical(_fn)


@converts("aten.logical_not.default", "aten.bitwise_not.default")
def logical_not(c: Converter, n):
    x = c.tensor(n.args[0])
    if c.g.dtype(x).name != "bool":
        raise c.refuse(f"not of a {c.g.dtype(x)} tensor is supported only on bool")
    return c.apply("logical_not", [x])


def _reduce_bool(fn: str):
    def convert(c: Converter, n):
        x = c.tensor(n.args[0])
        if c.g.dtype(x).name != "bool":
            x = c.apply("compare_scalar", [x], fn="ne", value=0)
        rank = len(c.g.shape(x))
        axes = _axes(arg(n, 1, "dim"), rank)
        return c.apply("reduce_bool", [x], fn=fn, axes=axes, keepdim=bool(arg(n, 2, "keepdim", False)))
    return convert


CONVERTERS["aten.any.dim"] = CONVERTERS["aten.any.dims"] = CONVERTERS["aten.any.default"] = _reduce_bool("any")
CONVERTERS["aten.all.dim"] = CONVERTERS["aten.all.dims"] = CONVERTERS["aten.all.default"] = _reduce_bool("all")


# ---------------------------------------------------------------- indexing

@converts("aten.gather.default")
def gather(c: Converter, n):
    x, index = c.tensor(n.args[0]), c.tensor(n.args[2])
    return c.apply("gather", [x, index], axis=n.args[1] % len(c.g.shape(x)))


@converts("aten.index_select.default")
def index_select(c: Converter, n):
    x, index = c.tensor(n.args[0]), c.tensor(n.args[2])
    return c.apply("index_select", [x, index], axis=n.args[1] % len(c.g.shape(x)))


@converts("aten.index.Tensor")
def index(c: Converter, n):
    """x[ids] with one 1-D integer index on one axis (the others taken whole): index_select."""
    x, indices = c.tensor(n.args[0]), list(n.args[1])
    given = [i for i, t in enumerate(indices) if t is not None]
    if len(given) != 1:
        raise c.refuse("indexing with several index tensors is not supported (one 1-D index on one axis is)")
    ids = c.tensor(indices[given[0]])
    if len(c.g.shape(ids)) != 1 or c.g.dtype(ids).kind not in "iu":
        raise c.refuse("only a 1-D integer index is supported (not a mask or a multi-dimensional index)")
    return c.apply("index_select", [x, ids], axis=given[0])


# ---------------------------------------------------------------- reductions

def _reduce(fn: str, dim_at: int):
    def convert(c: Converter, n):
        x = c.tensor(n.args[0])
        shape = c.g.shape(x)
        axes = _axes(arg(n, dim_at, "dim"), len(shape))
        keepdim = bool(arg(n, dim_at + 1, "keepdim", False))
        dtype = n.kwargs.get("dtype")
        if dtype is not None and str(dtype) != f"torch.{c.g.dtype(x)}":
            raise c.refuse("a reduction that changes the dtype is not supported")
        if fn == "mean" and len(shape) == 4 and axes == (2, 3):
            y = c.apply("global_avg_pool", [x])       # the zoo's own operator for CNN heads
            if keepdim:
                y = c.apply("reshape", [y], shape=c.shape())
            return y
        return c.apply("reduce", [x], fn=fn, axes=axes, keepdim=keepdim)
    return convert


CONVERTERS["aten.sum.dim_IntList"] = _reduce("sum", 1)
CONVERTERS["aten.mean.dim"] = _reduce("mean", 1)
CONVERTERS["aten.amax.default"] = _reduce("amax", 1)
CONVERTERS["aten.amin.default"] = _reduce("amin", 1)


@converts("aten.sum.default", "aten.mean.default")
def reduce_all(c: Converter, n):
    x = c.tensor(n.args[0])
    fn = "sum" if "sum" in str(n.target) else "mean"
    return c.apply("reduce", [x], fn=fn, axes=tuple(range(len(c.g.shape(x)))), keepdim=False)


# ---------------------------------------------------------------- matrix products

@converts("aten.mm.default", "aten.bmm.default")
def mm(c: Converter, n):
    a, ta = c.matrix(n.args[0])
    b, tb = c.matrix(n.args[1])
    if tb and not ta and len(c.g.shape(a)) == 2:
        return c.apply("fully_connected", [a, b])          # x @ W.T, W stored [out, in]: a linear layer
    return c.apply("batch_matmul", [a, b], transpose_a=ta, transpose_b=tb)


@converts("aten.addmm.default")
def addmm(c: Converter, n):
    """beta * bias + alpha * (a @ b); a linear layer (b the transpose of W [out, in], a 1-D bias,
    alpha = beta = 1) becomes our fully_connected."""
    beta, alpha = n.kwargs.get("beta", 1), n.kwargs.get("alpha", 1)
    bias = c.tensor(n.args[0])
    a, ta = c.matrix(n.args[1])
    b, tb = c.matrix(n.args[2])
    if tb and not ta and beta == 1 and alpha == 1 and c.g.shape(bias) == (c.g.shape(b)[0],):
        return c.apply("fully_connected", [a, b, bias])
    y = c.apply("batch_matmul", [a, b], transpose_a=ta, transpose_b=tb)
    if alpha != 1:
        y = c.apply("scalar", [y], fn="mul", value=float(alpha))
    if beta != 1:
        bias = c.apply("scalar", [bias], fn="mul", value=float(beta))
    return c.apply("binary", [bias, y], fn="add")


# ---------------------------------------------------------------- networks

@converts("aten.convolution.default")
def convolution(c: Converter, n):
    x, w = c.tensor(n.args[0]), c.tensor(n.args[1])
    bias, stride, padding, dilation, transposed, _, groups = (n.args[2:9] + (None,) * 7)[:7]
    if len(c.g.shape(x)) != 4:
        raise c.refuse("only 2-D convolutions (4-D inputs) are supported")
    if transposed:
        raise c.refuse("transposed convolutions are not supported")
    if any(d != 1 for d in dilation):
        raise c.refuse(f"dilation {list(dilation)} is not supported (only 1)")
    y = c.apply("conv2d", [x, w], stride=tuple(stride), padding=tuple(padding), groups=int(groups))
    if bias is None:
        return y
    b = c.apply("reshape", [c.tensor(bias)], shape=(c.g.shape(w)[0], 1, 1))
    return c.apply("binary", [y, b], fn="add")


@converts("aten._native_batch_norm_legit_functional.default")
def batch_norm_functional(c: Converter, n):
    """(out, save_mean, save_invstd, running_mean', running_var'), training or not."""
    x, weight, bias, running_mean, running_var, training, momentum, eps = n.args[:8]
    if not training:
        return _batch_norm_inference(c, x, weight, bias, running_mean, running_var, eps) + (
            Unusable("batch norm's saved statistics"),) * 2 + (c.tensor(running_mean), c.tensor(running_var))
    xs = c.tensor(x)
    channels = c.g.shape(xs)[1]
    mean, invstd, mean_next, var_next = c.apply(
        "batch_norm_stats", [xs, c.tensor(running_mean), c.tensor(running_var)], eps=float(eps),
        momentum=1.0 - float(momentum))
    gamma, beta = _affine(c, weight, bias, channels, c.g.dtype(xs))
    y = c.apply("batch_norm_apply", [xs, gamma, beta, mean, invstd])
    return (y, mean, invstd, mean_next, var_next)


@converts("aten._native_batch_norm_legit_no_training.default")
def batch_norm_inference(c: Converter, n):
    x, weight, bias, running_mean, running_var, _, eps = n.args[:7]
    return _batch_norm_inference(c, x, weight, bias, running_mean, running_var, eps) + (
        Unusable("batch norm's saved statistics"),) * 2


def _batch_norm_inference(c: Converter, x, weight, bias, running_mean, running_var, eps) -> tuple:
    """(x - mean) * (rsqrt(var + eps) * gamma) + beta with the running statistics, from
    element-wise operators (batch_norm_apply's gradient is only right with batch statistics)."""
    xs = c.tensor(x)
    channels, dtype = c.g.shape(xs)[1], c.g.dtype(xs)
    per_channel = (channels,) + (1,) * (len(c.g.shape(xs)) - 2)
    gamma, beta = _affine(c, weight, bias, channels, dtype)
    invstd = c.apply("unary", [c.apply("scalar", [c.tensor(running_var)], fn="add", value=float(eps))], fn="rsqrt")
    scale = c.apply("reshape", [c.apply("binary", [invstd, gamma], fn="mul")], shape=per_channel)
    mean = c.apply("reshape", [c.tensor(running_mean)], shape=per_channel)
    centered = c.apply("binary", [xs, mean], fn="sub")
    scaled = c.apply("binary", [centered, scale], fn="mul")
    return (c.apply("binary", [scaled, c.apply("reshape", [beta], shape=per_channel)], fn="add"),)


def _affine(c: Converter, weight, bias, size: int, dtype) -> tuple[int, int]:
    """gamma and beta, ones and zeros where the model has none."""
    import torch

    torch_dtype = getattr(torch, dtype.name)
    gamma = c.tensor(weight) if weight is not None else c.tensor(torch.ones(size, dtype=torch_dtype))
    beta = c.tensor(bias) if bias is not None else c.tensor(torch.zeros(size, dtype=torch_dtype))
    return gamma, beta


@converts("aten.native_layer_norm.default")
def layer_norm(c: Converter, n):
    x, normalized_shape, weight, bias, eps = n.args[:5]
    xs = c.tensor(x)
    if len(normalized_shape) != 1:
        raise c.refuse(f"layer norm over {len(normalized_shape)} axes is supported only over the last one")
    gamma, beta = _affine(c, weight, bias, normalized_shape[0], c.g.dtype(xs))
    y, mean, invstd = c.apply("layer_norm", [xs, gamma, beta], eps=float(eps))
    return (y, mean, invstd)


@converts("aten._softmax.default")
def softmax(c: Converter, n):
    return _last_axis(c, n, "softmax")


@converts("aten._log_softmax.default")
def log_softmax(c: Converter, n):
    return _last_axis(c, n, "log_softmax")


def _last_axis(c: Converter, n, op: str):
    x = c.tensor(n.args[0])
    rank = len(c.g.shape(x))
    if n.args[1] % rank != rank - 1:
        raise c.refuse(f"{op} over axis {n.args[1]} is supported only over the last axis")
    return c.apply(op, [x])


@converts("aten.scaled_dot_product_attention.default")
def attention(c: Converter, n):
    """softmax(scale * q k^T (+ mask)) v, as the zoo's GPT builds it: the causal mask and the
    scale folded into our softmax when there is no other mask."""
    q, k, v = (c.tensor(a) for a in n.args[:3])
    mask, dropout, causal = arg(n, 3, "attn_mask"), arg(n, 4, "dropout_p", 0.0), arg(n, 5, "is_causal", False)
    scale, gqa = n.kwargs.get("scale"), n.kwargs.get("enable_gqa", False)
    if dropout:
        raise c.refuse("attention dropout is random: export with dropout_p=0 (eval mode)")
    if gqa:
        raise c.refuse("enable_gqa is not supported: repeat the key and value heads in the model")
    length, keys = c.g.shape(q)[-2], c.g.shape(k)[-2]
    if causal and length != keys:
        raise c.refuse("causal attention is supported only with as many queries as keys")
    scale = 1.0 / (c.g.shape(q)[-1] ** 0.5) if scale is None else float(scale)
    scores = c.apply("batch_matmul", [q, k], transpose_b=True)
    if mask is None:
        probs = c.apply("softmax", [scores], scale=scale, causal=bool(causal))
    else:
        scores = c.apply("scalar", [scores], fn="mul", value=scale)
        m = c.tensor(mask)
        if c.g.dtype(m).name == "bool":
            minus_inf = c.tensor(float("-inf"))
            scores = c.apply("where", [m, scores, c.apply("cast", [minus_inf], dtype=c.g.dtype(scores).name)])
        else:
            scores = c.apply("binary", [scores, m], fn="add")
        probs = c.apply("softmax", [scores], causal=bool(causal))
    return c.apply("batch_matmul", [probs, v])


@converts("aten.nll_loss_forward.default")
def nll_loss(c: Converter, n):
    logp, target, weight, reduction, ignore_index = n.args[:5]
    if weight is not None:
        raise c.refuse("class weights in the loss are not supported")
    if reduction not in (1, 2):
        raise c.refuse("only the mean or sum reduction of the loss is supported (not 'none')")
    loss = c.apply("nll_loss", [c.tensor(logp), c.tensor(target)], ignore_index=int(ignore_index),
                   reduction="mean" if reduction == 1 else "sum")
    return (loss, Unusable("nll_loss's total weight"))


@converts("aten.embedding.default")
def embedding(c: Converter, n):
    table, ids = c.tensor(n.args[0]), c.tensor(n.args[1])
    if arg(n, 2, "padding_idx", -1) != -1:
        raise c.refuse("an embedding with padding_idx is not supported")
    if arg(n, 3, "scale_grad_by_freq", False) or arg(n, 4, "sparse", False):
        raise c.refuse("scale_grad_by_freq and sparse embeddings are not supported")
    return c.apply("embedding", [table, ids])


@converts("aten.max_pool2d_with_indices.default")
def max_pool2d(c: Converter, n):
    x = c.tensor(n.args[0])
    kernel = tuple(n.args[1])
    stride = tuple(arg(n, 2, "stride", ()) or kernel)
    padding, dilation, ceil_mode = arg(n, 3, "padding", (0, 0)), arg(n, 4, "dilation", (1, 1)), arg(n, 5, "ceil_mode",
                                                                                                   False)
    if any(d != 1 for d in _pair(dilation)) or ceil_mode:
        raise c.refuse("max pooling with dilation or ceil_mode is not supported")
    y = c.apply("max_pool2d", [x], kernel=kernel, stride=stride, padding=_pair(padding))
    return (y, Unusable("max pooling's indices"))


@converts("aten.avg_pool2d.default")
def avg_pool2d(c: Converter, n):
    x = c.tensor(n.args[0])
    kernel = tuple(_pair(n.args[1]))
    stride = tuple(_pair(arg(n, 2, "stride", ()) or kernel))
    padding, ceil_mode = arg(n, 3, "padding", (0, 0)), arg(n, 4, "ceil_mode", False)
    include_pad, divisor = arg(n, 5, "count_include_pad", True), arg(n, 6, "divisor_override")
    if ceil_mode or divisor is not None:
        raise c.refuse("average pooling with ceil_mode or divisor_override is not supported")
    return c.apply("avg_pool2d", [x], kernel=kernel, stride=stride, padding=_pair(padding),
                   count_include_pad=bool(include_pad))


def _pair(v) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    v = tuple(v)
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


# Operators that only ever run at import time, on constants (positions, tables, masks built
# from them): a computed input to any of them is refused by the missing converter; for the docs.
CONSTANT_ONLY = ("aten.arange.start_step", "aten.arange.default", "aten.full.default", "aten.full_like.default",
                 "aten.scalar_tensor.default", "aten.zeros.default", "aten.ones.default", "aten.triu.default",
                 "aten.tril.default", "aten.empty.memory_format", "aten.cumsum.default")
