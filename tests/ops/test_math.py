"""ops/math.py: unary, scalar, cast and slice with their gradients. Shape rules and errors,
numpy results, float64 finite differences for every fn, PyTorch's outputs and gradients
(torch.autograd) to 1e-12 in float64, and the CUDA kernels on the host emulation for every
case in cuda_cases (not only the cheapest per kernel, as test_cuda_emulated picks)."""
from types import SimpleNamespace

import numpy as np
import pytest

from ops import registry
from ops.math import CAST_DTYPES, SCALAR_FNS, UNARY_FNS, slice_bounds
from ops.registry import OpError, ShapeError

from . import cuda_emulator
from .opcheck import Eager, check_gradient, run_op

rng = np.random.default_rng(0)
POSITIVE = {"log", "sqrt", "rsqrt", "reciprocal"}
MATH_OPS = ("unary", "unary_grad", "scalar", "scalar_grad", "cast", "slice", "slice_grad")


def _x(fn, shape=(3, 5), positive=False):
    x = rng.standard_normal(shape)
    if positive or fn in POSITIVE:
        x = np.abs(x) + 0.25
    return x


def _ours(op, arrays, dy, **attrs):
    """(y, [dx per input]) from our forward and gradient declaration, run eagerly."""
    ev = Eager()
    ids = [ev.const(a) for a in arrays]
    outs = ev.apply(op, ids, **attrs)
    dyid = ev.const(dy)
    node = SimpleNamespace(op=op, attrs=ev.last_attrs, inputs=tuple(ids), outputs=tuple(outs))
    grads = registry.get(op).gradient(ev, node, [dyid], [True] * len(ids))
    return ev.arrays[outs[0]], [None if gi is None else ev.arrays[gi] for gi in grads]


# ------------------------------------------------------------------ shape rules and errors

def test_shape_rules():
    x = np.zeros((4, 9, 5))
    assert registry.get("unary").infer({"fn": "exp"}, [x]) == [((4, 9, 5), np.float64)]
    assert registry.get("cast").infer({"dtype": "int32"}, [x]) == [((4, 9, 5), np.int32)]
    sl = registry.get("slice")
    for attrs, size in [({"axis": 1, "start": -7, "stop": 8, "step": 2}, 3), ({"axis": 1, "start": 2}, 7),
                        ({"axis": -2, "start": -100, "stop": 100}, 9), ({"axis": 1, "start": 5, "stop": 2}, 0),
                        ({"axis": 1, "start": 20}, 0), ({"axis": 1, "stop": -20}, 0),
                        ({"axis": 1, "start": 0, "stop": 9, "step": 4}, 3)]:
        assert sl.infer(sl.canon(attrs), [x]) == [((4, size, 5), np.float64)], attrs
    assert slice_bounds(sl.canon({"axis": 1, "start": -7, "stop": -1, "step": 2}), (4, 9, 5)) == (1, 2, 8, 2, 3)
    sg = registry.get("slice_grad")
    a = sg.canon({"shape": [4, 9, 5], "axis": 1, "start": 2, "stop": 8, "step": 2})
    assert sg.infer(a, [np.zeros((4, 3, 5))]) == [((4, 9, 5), np.float64)]


def test_errors_are_one_actionable_line():
    cases = [
        (ShapeError, "floating", lambda: registry.get("unary").infer({"fn": "exp"}, [np.zeros(3, np.int32)])),
        (OpError, "fn must be one of neg", lambda: registry.get("unary").canon({"fn": "tan"})),
        (OpError, "missing attributes", lambda: registry.get("unary").canon({})),
        (ShapeError, "one shape", lambda: registry.get("unary_grad").infer(
            {"fn": "exp"}, [np.zeros(3), np.zeros(3), np.zeros(4)])),
        (ShapeError, "dtypes", lambda: registry.get("scalar_grad").infer(
            {"fn": "pow", "value": 2.0}, [np.zeros(3), np.zeros(3, np.float32)])),
        (OpError, "value must be a number", lambda: registry.get("scalar").canon({"fn": "add", "value": "x"})),
        (OpError, "fn must be one of add", lambda: registry.get("scalar").canon({"fn": "fmod", "value": 1})),
        (OpError, "cast supports", lambda: registry.get("cast").canon({"dtype": "float16"})),
        (ShapeError, "cast supports", lambda: registry.get("cast").infer({"dtype": "int32"}, [np.zeros(3, np.int8)])),
        (OpError, "step must be a positive int", lambda: registry.get("slice").canon({"axis": 0, "step": 0})),
        (OpError, "start must be an int", lambda: registry.get("slice").canon({"start": 1.5})),
        (ShapeError, "axis 2 is out of range", lambda: registry.get("slice").infer(
            registry.get("slice").canon({"axis": 2}), [np.zeros((3, 4))])),
        (ShapeError, "dy has shape", lambda: registry.get("slice_grad").infer(
            registry.get("slice_grad").canon({"shape": (4, 9), "axis": 1, "start": 1, "step": 2}),
            [np.zeros((4, 5))])),
        (OpError, "missing attributes", lambda: registry.get("slice_grad").canon({"axis": 0})),
    ]
    for kind, match, call in cases:
        with pytest.raises(kind, match=match) as err:
            call()
        assert "\n" not in str(err.value)


def test_costs():
    x = np.zeros((4, 8))
    assert registry.get("unary").cost({"fn": "neg"}, [x], [x]).flops == 32
    assert registry.get("unary").cost({"fn": "exp"}, [x], [x]).flops > 32
    c = registry.get("slice").cost({}, [x], [np.zeros((4, 2))])
    assert c.flops == 0 and c.bytes == 2 * 64


# ------------------------------------------------------------------ numpy results

def _reference_unary(fn, x):
    return {"neg": lambda: -x, "exp": lambda: np.exp(x), "log": lambda: np.log(x), "sqrt": lambda: np.sqrt(x),
            "rsqrt": lambda: 1 / np.sqrt(x), "sin": lambda: np.sin(x), "cos": lambda: np.cos(x),
            "abs": lambda: np.abs(x), "reciprocal": lambda: 1 / x, "silu": lambda: x / (1 + np.exp(-x))}[fn]()


@pytest.mark.parametrize("fn", UNARY_FNS)
def test_unary_matches_numpy(fn):
    x = _x(fn, (4, 6))
    np.testing.assert_allclose(run_op("unary", [x], fn=fn)[0], _reference_unary(fn, x), rtol=1e-14, atol=1e-15)
    y32 = run_op("unary", [x.astype(np.float32)], fn=fn)[0]
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, _reference_unary(fn, x.astype(np.float32).astype(np.float64)), rtol=1e-6)


@pytest.mark.parametrize("fn", SCALAR_FNS)
def test_scalar_matches_numpy(fn):
    x = _x(fn, (4, 6), positive=True)
    v = 0.75
    want = {"add": x + v, "sub": x - v, "rsub": v - x, "mul": x * v, "div": x / v, "pow": x ** v,
            "maximum": np.maximum(x, v), "minimum": np.minimum(x, v)}[fn]
    np.testing.assert_allclose(run_op("scalar", [x], fn=fn, value=v)[0], want, rtol=1e-15)


@pytest.mark.parametrize("v", [0.0, 1.0, 2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 1.7])
def test_pow_exponents(v):
    x = _x("pow", (5,), positive=True)
    np.testing.assert_allclose(run_op("scalar", [x], fn="pow", value=v)[0], x ** v, rtol=1e-15)


@pytest.mark.parametrize("src", CAST_DTYPES)
@pytest.mark.parametrize("dst", CAST_DTYPES)
def test_cast_is_astype(src, dst):
    x = (rng.standard_normal((3, 4)) * 5).astype(src)
    (y,) = run_op("cast", [x], dtype=dst)
    assert y.dtype == np.dtype(dst) and np.array_equal(y, x.astype(dst))
    if src.startswith("float") and dst.startswith("int"):       # truncation toward zero, as PyTorch
        assert np.array_equal(y, np.trunc(x).astype(dst))


@pytest.mark.parametrize("attrs", [dict(axis=1, start=-7, stop=8, step=2), dict(axis=0, start=1),
                                   dict(axis=-1, start=-100, stop=-1, step=3), dict(axis=1, start=6, stop=2),
                                   dict(axis=2, stop=2**63 - 1)])
def test_slice_is_python_slicing(attrs):
    x = rng.standard_normal((4, 9, 5))
    (y,) = run_op("slice", [x], **attrs)
    idx = [slice(None)] * 3
    idx[attrs["axis"]] = slice(attrs.get("start", 0), attrs.get("stop"), attrs.get("step", 1))
    assert np.array_equal(y, x[tuple(idx)])
    xi = np.arange(4 * 9 * 5).reshape(4, 9, 5)                 # any dtype
    assert np.array_equal(run_op("slice", [xi], **attrs)[0], xi[tuple(idx)])


# ------------------------------------------------------------------ finite differences

SHAPES = [(7,), (3, 5)]


@pytest.mark.parametrize("fn", UNARY_FNS)
@pytest.mark.parametrize("shape", SHAPES)
def test_unary_gradients(fn, shape):
    check_gradient("unary", [_x(fn, shape)], attrs={"fn": fn})


@pytest.mark.parametrize("fn", UNARY_FNS)
def test_unary_grad_reads_what_pytorch_saves(fn):
    """unary_grad is given (x, y, dy): its result must not change with a wrong y for the fns
    whose formula reads x, nor with a wrong x for those reading y."""
    x = _x(fn, (6,))
    (y,) = run_op("unary", [x], fn=fn)
    dy = rng.standard_normal(6)
    (dx,) = run_op("unary_grad", [x, y, dy], fn=fn)
    reads_y = fn in ("exp", "sqrt", "rsqrt", "reciprocal")
    wrong = [x, y + 1, dy] if not reads_y else [x + 1, y, dy]
    assert np.array_equal(run_op("unary_grad", wrong, fn=fn)[0], dx)


@pytest.mark.parametrize("fn", SCALAR_FNS)
@pytest.mark.parametrize("shape", SHAPES)
def test_scalar_gradients(fn, shape):
    x = _x(fn, shape, positive=fn == "pow")
    if fn in ("maximum", "minimum"):                   # away from the kink
        x = np.where(np.abs(x - 0.3) < 1e-3, x + 0.01, x)
    check_gradient("scalar", [x], attrs={"fn": fn, "value": 0.3})


@pytest.mark.parametrize("v", [0.0, 1.0, 2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 2.5])
def test_pow_gradients(v):
    check_gradient("scalar", [_x("pow", (3, 4), positive=True)], attrs={"fn": "pow", "value": v})


@pytest.mark.parametrize("fn", SCALAR_FNS)
def test_scalar_grad_matches_the_gradient_scalar_emits(fn):
    """scalar_grad handles every fn alike, although the gradient uses scalar/unary for the linear ones."""
    x, dy = _x(fn, (8,), positive=True), rng.standard_normal(8)
    _, (dx,) = _ours("scalar", [x], dy, fn=fn, value=0.75)
    np.testing.assert_array_equal(run_op("scalar_grad", [x, dy], fn=fn, value=0.75)[0], dx)


def test_cast_gradients():
    check_gradient("cast", [rng.standard_normal((3, 4))], attrs={"dtype": "float64"})
    x32 = rng.standard_normal((3, 4)).astype(np.float32)
    dy = rng.standard_normal((3, 4))
    _, (dx,) = _ours("cast", [x32], dy, dtype="float64")
    assert dx.dtype == np.float32 and np.array_equal(dx, dy.astype(np.float32))
    assert registry.get("cast").differentiable
    for src, dst in [("float64", "int64"), ("float32", "bool"), ("int32", "float64"), ("bool", "float32"),
                     ("int64", "int32")]:
        x = (rng.standard_normal(5) * 3).astype(src)
        y, grads = _ours("cast", [x], np.zeros(5, dst), dtype=dst)
        assert grads == [None], (src, dst)


@pytest.mark.parametrize("attrs", [dict(axis=1, start=-7, stop=8, step=2), dict(axis=0, start=1, step=3),
                                   dict(axis=-1, start=1, stop=-1), dict(axis=1, start=6, stop=2)])
def test_slice_gradients(attrs):
    x = rng.standard_normal((4, 9, 5))
    check_gradient("slice", [x], attrs=attrs)
    y, (dx,) = _ours("slice", [x], np.ones(run_op("slice", [x], **attrs)[0].shape), **attrs)
    idx = [slice(None)] * 3
    idx[attrs["axis"]] = slice(attrs.get("start", 0), attrs.get("stop"), attrs.get("step", 1))
    want = np.zeros_like(x)
    want[tuple(idx)] = 1
    assert np.array_equal(dx, want)


def test_slice_grad_gradient():
    check_gradient("slice_grad", [rng.standard_normal((4, 3, 5))],
                   attrs={"shape": (4, 9, 5), "axis": 1, "start": 2, "stop": 8, "step": 2})


def test_integer_slices_have_no_gradient():
    _, grads = _ours("slice", [np.arange(10)], np.zeros(3), axis=0, start=1, step=3)
    assert grads == [None]


# ------------------------------------------------------------------ PyTorch

@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return torch


def _torch_grad(torch, f, x, dy):
    t = torch.tensor(x, requires_grad=True)
    y = f(t)
    (dx,) = torch.autograd.grad(y, t, torch.tensor(dy))
    return y.detach().numpy(), dx.numpy()


def _close(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, what
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * scale, err_msg=what)


def _torch_unary(torch, fn):
    F = torch.nn.functional
    return {"neg": torch.neg, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
            "sin": torch.sin, "cos": torch.cos, "abs": torch.abs, "reciprocal": torch.reciprocal,
            "silu": F.silu}[fn]


@pytest.mark.parametrize("fn", UNARY_FNS)
def test_unary_matches_torch(torch, fn):
    x = _x(fn, (5, 40)) * (1 if fn in POSITIVE else 3)
    dy = rng.standard_normal(x.shape)
    y, (dx,) = _ours("unary", [x], dy, fn=fn)
    ty, tdx = _torch_grad(torch, _torch_unary(torch, fn), x, dy)
    _close(y, ty, f"{fn} forward")
    _close(dx, tdx, f"{fn} gradient")


def _torch_scalar(torch, fn, v):
    return {"add": lambda t: torch.add(t, v), "sub": lambda t: torch.sub(t, v), "rsub": lambda t: torch.rsub(t, v),
            "mul": lambda t: torch.mul(t, v), "div": lambda t: torch.div(t, v), "pow": lambda t: torch.pow(t, v),
            "maximum": lambda t: torch.clamp_min(t, v), "minimum": lambda t: torch.clamp_max(t, v)}[fn]


SCALAR_TORCH_CASES = [(fn, 0.75) for fn in SCALAR_FNS] + [("pow", v) for v in (2.0, 0.5, -1.0, 0.0, 3.0, -0.5, -2.0,
                                                                                   1.0, 2.5)]


@pytest.mark.parametrize("fn,v", SCALAR_TORCH_CASES)
def test_scalar_matches_torch(torch, fn, v):
    x = _x(fn, (5, 40), positive=fn == "pow" and v != int(v)) * 2
    if fn in ("maximum", "minimum"):
        x.flat[:3] = v                              # ties: clamp's gradient is 0 at x == v
    dy = rng.standard_normal(x.shape)
    y, (dx,) = _ours("scalar", [x], dy, fn=fn, value=v)
    ty, tdx = _torch_grad(torch, _torch_scalar(torch, fn, v), x, dy)
    _close(y, ty, f"{fn} {v} forward")
    _close(dx, tdx, f"{fn} {v} gradient")


@pytest.mark.parametrize("attrs", [dict(axis=1, start=-7, stop=8, step=2), dict(axis=0, start=-3, stop=None, step=2),
                                   dict(axis=2, start=1, stop=-1, step=1), dict(axis=1, start=-100, stop=100, step=3)])
def test_slice_matches_torch(torch, attrs):
    x = rng.standard_normal((4, 9, 5))
    y = run_op("slice", [x], **attrs)[0]
    dy = rng.standard_normal(y.shape)
    y, (dx,) = _ours("slice", [x], dy, **attrs)
    a = attrs
    ty, tdx = _torch_grad(torch, lambda t: torch.ops.aten.slice.Tensor(t, a["axis"], a["start"], a["stop"], a["step"]),
                          x, dy)
    assert np.array_equal(y, ty) and np.array_equal(dx, tdx)


@pytest.mark.parametrize("src,dst", [("float32", "float64"), ("float64", "float32"), ("float64", "float64")])
def test_cast_matches_torch(torch, src, dst):
    x = rng.standard_normal((4, 6)).astype(src)
    dy = rng.standard_normal((4, 6)).astype(dst)
    y, (dx,) = _ours("cast", [x], dy, dtype=dst)
    ty, tdx = _torch_grad(torch, lambda t: t.to(getattr(torch, dst)), x, dy)
    assert y.dtype == ty.dtype and np.array_equal(y, ty)
    assert dx.dtype == tdx.dtype and np.array_equal(dx, tdx)


def test_float_to_int_cast_matches_torch(torch):
    x = rng.standard_normal((4, 6)) * 5
    for dst in ("int32", "int64", "bool"):
        assert np.array_equal(run_op("cast", [x], dtype=dst)[0], torch.tensor(x).to(getattr(torch, dst)).numpy())


# ------------------------------------------------------------------ CUDA kernels on the host

@pytest.mark.skipif(not cuda_emulator.available(), reason="g++ is needed to build the host emulation")
def test_every_math_case_on_the_host_emulation():
    from .cuda_cases import all_cases
    from .test_cuda_emulated import emulation_failures
    cases = [c for c in all_cases() if c.op in MATH_OPS]
    assert {c.op for c in cases} == set(MATH_OPS)
    failures = emulation_failures(cases)
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------------ in a graph

def test_graph_of_math_ops_trains_with_autodiff():
    """A parameter through slice, every unary fn, scalar and casts: the autodiff's whole-graph
    gradient against finite differences, and the graph validates as a training iteration."""
    from engine import reference
    from engine.autodiff import build_training_graph, gradients
    from engine.initializers import initial_state
    from engine.ir import Graph

    def build():
        g = Graph("math")
        x = g.input("x", (5, 12), "float64")
        w = g.parameter("w", (12,), "float64", init="normal:0.5")
        w3 = g.parameter("w3", (3, 4), "float64", init="normal:0.5")
        (ws,) = g.apply("slice", [x], name="cols", axis=1, start=-10, stop=None, step=2)    # (5, 5)
        (h,) = g.apply("slice", [w], name="wsl", axis=0, start=1, stop=-1, step=2)          # (5,)
        (h,) = g.apply("scalar", [h], name="shift", fn="add", value=2.0)
        for fn in ("sqrt", "log", "exp", "rsqrt", "reciprocal", "sin", "cos", "silu", "neg", "abs"):
            (h,) = g.apply("unary", [h], name=fn, fn=fn)
        for fn, v in (("pow", 1.5), ("mul", 3.0), ("rsub", 1.0), ("div", 2.0), ("maximum", -5.0),
                      ("minimum", 5.0), ("sub", 0.5), ("pow", 2.0)):
            (h,) = g.apply("scalar", [h], name=f"{fn}{v}", fn=fn, value=v)
        (h,) = g.apply("cast", [h], name="to64", dtype="float64")          # float32 would blur the differences
        (hi,) = g.apply("cast", [h], name="toint", dtype="int64")          # not differentiable, unused
        (h4,) = g.apply("reshape", [ws], name="rows", shape=(5, 5))
        (m,) = g.apply("fully_connected", [h4, g.apply("reshape", [h], name="hw", shape=(1, 5))[0]], name="fc")
        (m,) = g.apply("concat", [m, m, m, m], name="four", axis=1)                      # (5, 4)
        (logits,) = g.apply("fully_connected", [m, w3], name="fc3")
        labels = g.label("labels", (5,))
        loss, _ = g.apply("softmax_cross_entropy", [logits, labels], name="loss")
        return g, loss

    g, loss = build()
    grads = gradients(g, loss)
    rng = np.random.default_rng(1)
    feeds = {**initial_state(g, 0), g.tensor_id("x"): rng.standard_normal((5, 12)),
             g.tensor_id("labels"): rng.integers(0, 3, 5).astype(np.int32)}
    out = reference.run(g, feeds)
    for p, gp in grads.items():
        for idx in list(np.ndindex(g.shape(p)))[:12]:
            plus, minus = dict(feeds), dict(feeds)
            plus[p], minus[p] = feeds[p].copy(), feeds[p].copy()
            plus[p][idx] += 1e-6
            minus[p][idx] -= 1e-6
            numeric = (reference.run(g, plus, keep=[loss])[loss] - reference.run(g, minus, keep=[loss])[loss]) / 2e-6
            assert abs(out[gp][idx] - numeric) < 1e-6 * max(1, abs(numeric)), (g.tensors[p].name, idx)
    g2, loss2 = build()
    build_training_graph(g2, loss2)
