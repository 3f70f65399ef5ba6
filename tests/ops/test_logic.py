"""ops/logic.py: compare, compare_scalar, logical, logical_not, reduce_bool: shape rules and
errors, compute against numpy's ufuncs and torch's operators, and autodiff through a mask of
a parameter."""
from types import SimpleNamespace

import numpy as np
import pytest

from ops import registry
from ops.logic import COMPARE_FNS, LOGICAL_FNS
from ops.registry import OpError, ShapeError

from .opcheck import run_op

rng = np.random.default_rng(0)
FAMILY = ("compare", "compare_scalar", "logical", "logical_not", "reduce_bool")
PAIRS = [((4, 1, 3), (2, 3)), ((3,), (2, 3)), ((), (2, 3)), ((2, 3), (2, 3)), ((2, 1, 4), (1, 3, 1)), ((5, 1), ())]
NP_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
              "ge": np.greater_equal}
NP_LOGICAL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def spec(shape, dtype="float32"):
    return SimpleNamespace(shape=tuple(shape), dtype=np.dtype(dtype))


def infer(op, ins, **attrs):
    decl = registry.get(op)
    attrs = decl.canon(attrs)
    return decl.infer(attrs, ins), attrs


def one_line(exc_info):
    assert "\n" not in str(exc_info.value)


def values(shape, dtype):
    """Ties, and for floats a NaN and infinities."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.kind in "iu":
        return np.asarray(rng.integers(-3, 4, size=shape)).astype(dtype)
    a = np.asarray(rng.integers(-8, 9, size=shape) / 4).astype(dtype)
    if a.size > 3:
        a.flat[1], a.flat[2], a.flat[3] = np.nan, np.inf, -np.inf
    return a


# ---------------------------------------------------------------------- shape rules and errors

def test_family_is_registered_without_gradients():
    for name in FAMILY:
        op = registry.get(name)
        assert not op.differentiable and op.cuda_kernels
        assert op.workspace({}, [], []) == 0


@pytest.mark.parametrize("a, b", PAIRS)
def test_compare_and_logical_broadcast_like_numpy(a, b):
    for op, attrs, dt in (("compare", {"fn": "lt"}, "float32"), ("compare", {"fn": "eq"}, "int64"),
                          ("logical", {"fn": "xor"}, "bool")):
        [(shape, dtype)], _ = infer(op, [spec(a, dt), spec(b, dt)], **attrs)
        assert shape == np.broadcast_shapes(a, b) and dtype == np.bool_


def test_compare_errors_are_one_line():
    with pytest.raises(ShapeError, match="do not broadcast") as e:
        infer("compare", [spec((4, 2)), spec((3,))], fn="eq")
    one_line(e)
    with pytest.raises(ShapeError, match="at most 6") as e:
        infer("compare", [spec((1,) * 7), spec((2,))], fn="eq")
    one_line(e)
    with pytest.raises(ShapeError, match="different dtypes") as e:
        infer("compare", [spec((2,), "float32"), spec((2,), "float64")], fn="eq")
    one_line(e)
    with pytest.raises(ShapeError, match="eq or ne only") as e:
        infer("compare", [spec((2,), "bool"), spec((2,), "bool")], fn="lt")
    one_line(e)
    with pytest.raises(ShapeError, match="compares float32") as e:
        infer("compare", [spec((2,), "float16"), spec((2,), "float16")], fn="eq")
    one_line(e)
    with pytest.raises(OpError, match="fn must be one of"):
        registry.get("compare").canon({"fn": "lte"})
    with pytest.raises(OpError, match="missing"):
        registry.get("compare").canon({})


def test_compare_scalar_rules():
    [(shape, dtype)], attrs = infer("compare_scalar", [spec((3, 4), "int32")], fn="gt", value=True)
    assert shape == (3, 4) and dtype == np.bool_ and attrs["value"] == 1 and type(attrs["value"]) is int
    _, attrs = infer("compare_scalar", [spec((3,))], fn="eq", value=np.float32(0.5))
    assert type(attrs["value"]) is float
    with pytest.raises(OpError, match="Python number") as e:
        registry.get("compare_scalar").canon({"fn": "eq", "value": "1"})
    one_line(e)
    with pytest.raises(OpError, match="int64"):
        registry.get("compare_scalar").canon({"fn": "eq", "value": 2**63})
    with pytest.raises(OpError, match="missing"):
        registry.get("compare_scalar").canon({"fn": "eq"})
    with pytest.raises(ShapeError, match="eq or ne only"):
        infer("compare_scalar", [spec((3,), "bool")], fn="ge", value=0)


def test_logical_rules():
    with pytest.raises(ShapeError, match="bool inputs") as e:
        infer("logical", [spec((2,), "bool"), spec((2,), "float32")], fn="and")
    one_line(e)
    with pytest.raises(ShapeError, match="bool inputs"):
        infer("logical_not", [spec((2,), "uint8")])
    with pytest.raises(OpError, match="fn must be one of"):
        registry.get("logical").canon({"fn": "nand"})
    [(shape, dtype)], _ = infer("logical_not", [spec((2, 5), "bool")])
    assert shape == (2, 5) and dtype == np.bool_


def test_reduce_bool_rules():
    [(shape, dtype)], attrs = infer("reduce_bool", [spec((2, 3, 4), "bool")], fn="any", axes=(-1, 0))
    assert shape == (3,) and dtype == np.bool_ and attrs["axes"] == (0, 2) and attrs["keepdim"] is False
    [(shape, _)], attrs = infer("reduce_bool", [spec((2, 3, 4), "bool")], fn="all", axes=1, keepdim=True)
    assert shape == (2, 1, 4) and attrs["axes"] == (1,)
    with pytest.raises(ShapeError, match="out of range") as e:
        infer("reduce_bool", [spec((2, 3), "bool")], fn="any", axes=(2,))
    one_line(e)
    with pytest.raises(ShapeError, match="bool inputs"):
        infer("reduce_bool", [spec((2, 3))], fn="any", axes=(0,))
    with pytest.raises(OpError, match="fn must be one of"):
        registry.get("reduce_bool").canon({"fn": "sum", "axes": (0,)})
    with pytest.raises(OpError, match="missing"):
        registry.get("reduce_bool").canon({"fn": "any"})
    with pytest.raises(OpError, match="keepdim"):
        registry.get("reduce_bool").canon({"fn": "any", "axes": (0,), "keepdim": 1})


def test_cost_is_one_flop_per_output_and_bytes_moved():
    ins = [spec((4, 1, 3), "float64"), spec((2, 3), "float64")]
    cost = registry.get("compare").cost({"fn": "eq"}, ins, [spec((4, 2, 3), "bool")])
    assert cost.flops == 24 and cost.bytes == 8 * 12 + 8 * 6 + 24


# ---------------------------------------------------------------------- compute against numpy

@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
@pytest.mark.parametrize("fn", COMPARE_FNS)
def test_compare_matches_numpy(fn, dtype):
    if dtype == "bool" and fn not in ("eq", "ne"):
        pytest.skip("bool compares with eq and ne only")
    for a, b in PAIRS:
        x, y = values(a, dtype), values(b, dtype)
        (got,) = run_op("compare", [x, y], fn=fn)
        want = np.empty(np.broadcast_shapes(a, b), bool)
        NP_COMPARE[fn](x, y, out=want)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == np.bool_


@pytest.mark.parametrize("fn", COMPARE_FNS)
def test_compare_scalar_matches_numpy(fn):
    x32 = values((5, 7), "float32")
    (got,) = run_op("compare_scalar", [x32], fn=fn, value=0.1)     # 0.1 rounded to float32 first
    np.testing.assert_array_equal(got, NP_COMPARE[fn](x32, np.float32(0.1)))
    (got,) = run_op("compare_scalar", [np.full(3, 0.1, np.float32)], fn="eq", value=0.1)
    assert got.all()
    xi = values((5, 7), "int64")
    (got,) = run_op("compare_scalar", [xi], fn=fn, value=1)
    np.testing.assert_array_equal(got, NP_COMPARE[fn](xi, 1))
    (got,) = run_op("compare_scalar", [xi.astype(np.int32)], fn=fn, value=0.5)   # in float64
    np.testing.assert_array_equal(got, NP_COMPARE[fn](xi.astype(np.float64), 0.5))
    big = np.array([2**53 + 1, 2**53], np.int64)       # exact in int64, not in float64
    (got,) = run_op("compare_scalar", [big], fn="eq", value=2**53 + 1)
    np.testing.assert_array_equal(got, [True, False])


@pytest.mark.parametrize("fn", LOGICAL_FNS)
def test_logical_matches_numpy(fn):
    for a, b in PAIRS:
        x, y = values(a, bool), values(b, bool)
        (got,) = run_op("logical", [x, y], fn=fn)
        want = np.empty(np.broadcast_shapes(a, b), bool)
        NP_LOGICAL[fn](x, y, out=want)
        np.testing.assert_array_equal(got, want)
    x = values((3, 4), bool)
    (got,) = run_op("logical_not", [x])
    np.testing.assert_array_equal(got, ~x)


@pytest.mark.parametrize("fn", ["any", "all"])
@pytest.mark.parametrize("shape, axes, keepdim", [((3, 4, 5), (-1, 0), False), ((3, 4, 5), (1,), True),
                                                  ((2, 3), (0, 1), False), ((3, 0, 2), (1,), False),
                                                  ((4, 5), (), False)])
def test_reduce_bool_matches_numpy(fn, shape, axes, keepdim):
    x = rng.random(shape) < (0.2 if fn == "any" else 0.8)
    (got,) = run_op("reduce_bool", [x], fn=fn, axes=axes, keepdim=keepdim)
    want = getattr(np, fn)(x, axis=axes, keepdims=keepdim)
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------- against torch

@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_compare_equals_torchs(dtype):
    torch = pytest.importorskip("torch")
    for a, b in PAIRS:
        x, y = values(a, dtype), values(b, dtype)
        for fn in COMPARE_FNS:
            (got,) = run_op("compare", [x, y], fn=fn)
            want = getattr(torch, fn)(torch.from_numpy(x), torch.from_numpy(y)).numpy()
            np.testing.assert_array_equal(got, want, err_msg=f"{fn} {a} {b}")
            for value in (0, 1, -0.5, 0.25, 2.0):
                if np.dtype(dtype).kind == "i" and isinstance(value, float) and value != int(value):
                    continue        # torch compares an int tensor with a float in float32, we in float64
                (got,) = run_op("compare_scalar", [x], fn=fn, value=value)
                want = getattr(torch, fn)(torch.from_numpy(x), value).numpy()
                np.testing.assert_array_equal(got, want, err_msg=f"{fn} {a} {value}")


def test_logical_and_reductions_equal_torchs():
    torch = pytest.importorskip("torch")
    for a, b in PAIRS:
        x, y = values(a, bool), values(b, bool)
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
        for fn in LOGICAL_FNS:
            (got,) = run_op("logical", [x, y], fn=fn)
            np.testing.assert_array_equal(got, getattr(torch, f"logical_{fn}")(tx, ty).numpy())
        (got,) = run_op("logical_not", [x])
        np.testing.assert_array_equal(got, torch.logical_not(tx).numpy())
        for e in (torch.eq(tx, ty), torch.ne(tx, ty)):
            assert e.dtype == torch.bool
    x = rng.random((3, 4, 5)) < 0.5
    tx = torch.from_numpy(x)
    for fn in ("any", "all"):
        for axes, keepdim in (((-1, 0), False), ((1,), True), ((0, 1, 2), False)):
            (got,) = run_op("reduce_bool", [x], fn=fn, axes=axes, keepdim=keepdim)
            np.testing.assert_array_equal(got, getattr(torch, fn)(tx, dim=axes, keepdim=keepdim).numpy())


# ---------------------------------------------------------------------- autodiff

def test_a_mask_of_a_parameter_is_a_constant_for_autodiff():
    """where(w > 0, w, y) and a reduce_bool/logical chain on w: the gradient flows through
    where's values only; the comparisons are constants."""
    from engine import reference
    from engine.autodiff import gradients
    from engine.initializers import initial_state
    from engine.ir import Graph

    g = Graph("mask")
    w = g.parameter("w", (3, 4), "float64", init="normal:1.0")
    y = g.input("y", (3, 4), "float64")
    (pos,) = g.apply("compare_scalar", [w], fn="gt", value=0.0)
    (big,) = g.apply("compare", [w, y], fn="ge")
    (m,) = g.apply("logical", [pos, big], fn="or")
    (m,) = g.apply("logical_not", [m])
    (anyrow,) = g.apply("reduce_bool", [m], fn="any", axes=(1,), keepdim=True)
    (m,) = g.apply("logical", [m, anyrow], fn="and")
    (h,) = g.apply("where", [pos, w, y])
    (h2,) = g.apply("where", [m, y, h])
    (loss,) = g.apply("reduce", [h2], fn="sum", axes=(0, 1))
    grads = gradients(g, loss)
    feeds = {**initial_state(g, 0), y: rng.standard_normal((3, 4))}
    out = reference.run(g, feeds)
    wv, yv = feeds[w], feeds[y]
    mask = ~((wv > 0) | (wv >= yv))
    mask &= mask.any(axis=1, keepdims=True)
    np.testing.assert_array_equal(out[grads[w]], np.where(mask, 0.0, np.where(wv > 0, 1.0, 0.0)))
