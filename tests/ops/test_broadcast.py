"""ops/broadcast.py: binary, where, reduce, broadcast_to, their gradient operators and sum_to."""
from types import SimpleNamespace

import numpy as np
import pytest

from ops import registry
from ops.broadcast import BINARY_FNS, REDUCE_FNS, broadcast_shapes, sum_to
from ops.registry import OpError, ShapeError

from .opcheck import Eager, check_gradient, run_op

rng = np.random.default_rng(0)
FAMILY = {"binary", "binary_grad", "where", "broadcast_to", "reduce", "reduce_grad"}
PAIRS = [((4, 1, 3), (2, 3)), ((3,), (2, 3)), ((), (2, 3)), ((2, 3), (2, 3)), ((2, 1, 4), (1, 3, 1)),
         ((5, 1), ())]


def spec(shape, dtype="float64"):
    return SimpleNamespace(shape=tuple(shape), dtype=np.dtype(dtype))


def infer(op, ins, **attrs):
    decl = registry.get(op)
    attrs = decl.canon(attrs)
    return decl.infer(attrs, [spec(*t) if isinstance(t, tuple) and t and isinstance(t[0], tuple) else spec(t)
                              for t in ins]), attrs


def one_line_error(exc_info):
    assert "\n" not in str(exc_info.value)


# ---------------------------------------------------------------------- shape rules

@pytest.mark.parametrize("a, b, want", [((4, 1, 3), (2, 3), (4, 2, 3)), ((3,), (2, 3), (2, 3)), ((), (2, 3), (2, 3)),
                                        ((0, 1), (1, 5), (0, 5)), ((2, 1, 4), (1, 3, 1), (2, 3, 4))])
def test_binary_broadcasts_like_numpy(a, b, want):
    [(shape, dtype)], _ = infer("binary", [a, b], fn="add")
    assert shape == want == np.broadcast_shapes(a, b) and dtype == np.float64


def test_binary_errors_are_one_line():
    with pytest.raises(ShapeError, match="do not broadcast") as e:
        infer("binary", [(4, 2), (3,)], fn="mul")
    one_line_error(e)
    with pytest.raises(ShapeError, match="at most 6") as e:
        infer("binary", [(1,) * 7, (2,)], fn="mul")
    one_line_error(e)
    with pytest.raises(ShapeError, match="dtypes"):
        registry.get("binary").infer({"fn": "add"}, [spec((2,), "float32"), spec((2,))])
    with pytest.raises(ShapeError, match="floating"):
        registry.get("binary").infer({"fn": "add"}, [spec((2,), "int32"), spec((2,), "int32")])
    with pytest.raises(OpError, match="fn must be one of"):
        registry.get("binary").canon({"fn": "pow"})
    with pytest.raises(OpError, match="missing"):
        registry.get("binary").canon({})


def test_where_rules():
    [(shape, dtype)], _ = infer("where", [((4, 1, 3), "bool"), (2, 3), ()])
    assert shape == (4, 2, 3) and dtype == np.float64
    infer("where", [((3,), "uint8"), (3,), (3,)])
    with pytest.raises(ShapeError, match="cond must be bool") as e:
        infer("where", [((3,), "float64"), (3,), (3,)])
    one_line_error(e)
    with pytest.raises(ShapeError, match="do not broadcast"):
        infer("where", [((2,), "bool"), (3,), (3,)])
    with pytest.raises(ShapeError, match="dtypes"):
        registry.get("where").infer({}, [spec((3,), "bool"), spec((3,)), spec((3,), "float32")])


def test_broadcast_to_rules():
    assert infer("broadcast_to", [(3, 1)], shape=(2, 3, 4))[0][0][0] == (2, 3, 4)
    assert infer("broadcast_to", [(3, 1)], shape=(2, -1, 4))[0][0][0] == (2, 3, 4)     # expand's -1
    for shape, match in [((3,), "fewer dimensions"), ((2, 4, 4), "only sizes 1 stretch"),
                         ((-1, 3, 1), "stands for no dimension"), ((1,) * 5 + (3, 1), "at most 6")]:
        with pytest.raises(ShapeError, match=match) as e:
            infer("broadcast_to", [(3, 1)], shape=shape)
        one_line_error(e)


def test_reduce_axes_are_canonical():
    [(shape, _)], attrs = infer("reduce", [(2, 3, 4)], fn="sum", axes=(-1, 0, -1), keepdim=False)
    assert shape == (3,) and attrs["axes"] == (0, 2)
    [(shape, _)], attrs = infer("reduce", [(2, 3, 4)], fn="amax", axes=[1], keepdim=True)
    assert shape == (2, 1, 4) and attrs["axes"] == (1,)
    assert infer("reduce", [(2, 3)], fn="mean", axes=1)[0][0][0] == (2,)
    assert infer("reduce", [(2, 3)], fn="sum", axes=())[0][0][0] == (2, 3)            # numpy's axis=()
    ev = Eager()                                # the graph keeps the resolved axes
    ev.apply("reduce", [ev.const(np.ones((2, 3)))], fn="sum", axes=(-1,))
    assert ev.last_attrs["axes"] == (1,)


def test_reduce_errors_are_one_line():
    for ins, attrs, err, match in [([(2, 3)], {"fn": "sum", "axes": (2,)}, ShapeError, "out of range"),
                                   ([(2, 3)], {"fn": "sum", "axes": (1, -1)}, ShapeError, "twice"),
                                   ([(0, 3)], {"fn": "amax", "axes": (0,)}, ShapeError, "no extreme"),
                                   ([(2, 3)], {"fn": "max", "axes": (0,)}, OpError, "fn must be one of"),
                                   ([(2, 3)], {"fn": "sum", "axes": ("a",)}, OpError, "sequence of ints"),
                                   ([(2, 3)], {"fn": "sum", "axes": (0,), "keepdim": 1}, OpError, "bool"),
                                   ([(1,) * 7], {"fn": "sum", "axes": (0,)}, ShapeError, "at most 6")]:
        with pytest.raises(err, match=match) as e:
            infer("reduce", ins, **attrs)
        one_line_error(e)
    with pytest.raises(ShapeError, match="floating"):
        registry.get("reduce").infer({"fn": "sum", "axes": (0,), "keepdim": False}, [spec((2,), "int64")])


def test_gradient_operator_rules():
    assert infer("binary_grad", [(4, 1, 3), (2, 3), (4, 2, 3)], fn="maximum", side=1)[0][0][0] == (4, 2, 3)
    with pytest.raises(ShapeError, match="dy has shape"):
        infer("binary_grad", [(4, 1, 3), (2, 3), (2, 3)], fn="maximum", side=0)
    with pytest.raises(OpError, match="side"):
        registry.get("binary_grad").canon({"fn": "maximum", "side": 2})
    assert infer("reduce_grad", [(3, 4), (4,), (4,)], axes=(0,))[0][0][0] == (3, 4)
    with pytest.raises(ShapeError, match="reducing x"):
        infer("reduce_grad", [(3, 4), (1, 4), (1, 4)], axes=(0,))


def test_broadcast_shapes_helper():
    assert broadcast_shapes((2, 1), (3,), ()) == (2, 3)


# ---------------------------------------------------------------------- compute

@pytest.mark.parametrize("fn", BINARY_FNS)
@pytest.mark.parametrize("a, b", PAIRS)
def test_binary_computes_numpys_ufunc(fn, a, b):
    f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
         "minimum": np.minimum}[fn]
    x, y = rng.standard_normal(a), rng.standard_normal(b)
    for dtype in ("float64", "float32"):
        u, v = x.astype(dtype), y.astype(dtype)
        (got,) = run_op("binary", [u, v], fn=fn)
        assert got.dtype == dtype and np.array_equal(got, f(u, v))


def test_where_and_broadcast_to_compute():
    c = rng.random((4, 1, 3)) < 0.5
    a, b = rng.standard_normal((2, 3)), rng.standard_normal(())
    assert np.array_equal(run_op("where", [c, a, b])[0], np.where(c, a, b))
    assert np.array_equal(run_op("where", [c.astype(np.uint8), a, b])[0], np.where(c, a, b))
    x = rng.standard_normal((3, 1))
    assert np.array_equal(run_op("broadcast_to", [x], shape=(2, 3, 4))[0], np.broadcast_to(x, (2, 3, 4)))


@pytest.mark.parametrize("fn", REDUCE_FNS)
@pytest.mark.parametrize("axes, keepdim", [((0,), False), ((-1, 1), True), ((0, 1, 2), False), ((), False)])
def test_reduce_computes_numpys(fn, axes, keepdim):
    x = rng.standard_normal((3, 4, 5))
    f = {"sum": np.sum, "mean": np.mean, "amax": np.amax, "amin": np.amin}[fn]
    (got,) = run_op("reduce", [x], fn=fn, axes=axes, keepdim=keepdim)
    assert np.array_equal(got, f(x, axis=tuple(a % 3 for a in axes), keepdims=keepdim))


def test_costs():
    decl = registry.get("reduce")
    c = decl.cost({"fn": "sum", "axes": (0,), "keepdim": False}, [spec((3, 4))], [spec((4,))])
    assert c.flops == 12 and c.bytes == 16 * 8
    c = registry.get("binary").cost({"fn": "add"}, [spec((4, 1, 3)), spec((2, 3))], [spec((4, 2, 3))])
    assert c.flops == 24 and c.bytes == (12 + 6 + 24) * 8


# ---------------------------------------------------------------------- gradients (finite differences)

@pytest.mark.parametrize("fn", BINARY_FNS)
@pytest.mark.parametrize("a, b", PAIRS)
def test_binary_gradients(fn, a, b):
    x, y = rng.standard_normal(a), rng.standard_normal(b)
    if fn == "div":
        y = np.sign(y) * (np.abs(y) + 0.5)
    check_gradient("binary", [x, y], attrs={"fn": fn})


@pytest.mark.parametrize("fn", ["maximum", "minimum"])
def test_maximum_minimum_split_ties_in_halves(fn):
    """Integer-valued inputs tie often; a central difference at a tie sees half the slope."""
    x, y = np.round(rng.standard_normal((4, 1, 3))), np.round(rng.standard_normal((2, 3)))
    assert (np.broadcast_to(x, (4, 2, 3)) == np.broadcast_to(y, (4, 2, 3))).any()
    check_gradient("binary", [x, y], attrs={"fn": fn}, max_points=100)
    ev = Eager()
    a, b = ev.const(np.array([1.0, 2.0, 3.0])), ev.const(np.array([1.0, 5.0, 0.0]))
    (out,) = ev.apply("binary", [a, b], fn=fn)
    node = SimpleNamespace(op="binary", attrs={"fn": fn}, inputs=(a, b), outputs=(out,))
    ga, gb = registry.get("binary").gradient(ev, node, [ev.const(np.full(3, 4.0))], [True, True])
    want_a = [2.0, 0.0, 4.0] if fn == "maximum" else [2.0, 4.0, 0.0]
    assert ev.arrays[ga].tolist() == want_a and (ev.arrays[ga] + ev.arrays[gb]).tolist() == [4.0] * 3


@pytest.mark.parametrize("shapes", [((4, 1, 3), (2, 3), ()), ((3,), (2, 3), (2, 1)), ((2, 3), (2, 3), (2, 3))])
def test_where_gradients(shapes):
    c = rng.random(shapes[0]) < 0.5
    grads = check_gradient("where", [c, rng.standard_normal(shapes[1]), rng.standard_normal(shapes[2])])
    assert grads[0] is None


@pytest.mark.parametrize("fn", REDUCE_FNS)
@pytest.mark.parametrize("shape, axes, keepdim", [((3, 4, 5), (1,), False), ((3, 4, 5), (-1, 0), True),
                                                   ((3, 4), (0, 1), False), ((6,), (0,), True),
                                                   ((3, 4), (), False)])
def test_reduce_gradients(fn, shape, axes, keepdim):
    check_gradient("reduce", [rng.standard_normal(shape)], attrs={"fn": fn, "axes": axes, "keepdim": keepdim})


def _with_paired_extremes(shape, axis, fn):
    """Distinct values, then each reduced group's extreme written into a second element: two
    tied extremes, where a central difference sees half the slope, as mask / count gives."""
    x = rng.permutation(np.prod(shape)).reshape(shape).astype(np.float64)
    x = np.moveaxis(x, axis, -1)
    pick = np.argmax if fn == "amax" else np.argmin
    idx = pick(x, axis=-1)
    other = (idx + 1) % x.shape[-1]
    ext = np.take_along_axis(x, idx[..., None], -1)
    np.put_along_axis(x, other[..., None], ext, -1)
    return np.ascontiguousarray(np.moveaxis(x, -1, axis))


@pytest.mark.parametrize("fn", ["amax", "amin"])
def test_amax_amin_ties_share_the_gradient(fn):
    x = _with_paired_extremes((3, 4, 5), 1, fn)
    check_gradient("reduce", [x], attrs={"fn": fn, "axes": (1,)}, max_points=60)
    # three-way tie: each gets a third
    x = np.array([[1.0, 3.0, 3.0, 3.0], [0.0, 0.0, -1.0, 2.0]])
    if fn == "amin":
        x = -x
    (dx,) = run_op("reduce_grad", [x, run_op("reduce", [x], fn=fn, axes=(1,))[0], np.array([3.0, 5.0])],
                   axes=(1,))
    assert dx.tolist() == [[0.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 5.0]]


@pytest.mark.parametrize("src, target", [((3, 1), (2, 3, 4)), ((), (5,)), ((2, 3), (2, 3)), ((1, 3), (4, 3))])
def test_broadcast_to_gradient(src, target):
    check_gradient("broadcast_to", [rng.standard_normal(src)], attrs={"shape": target})


# ---------------------------------------------------------------------- sum_to

def test_sum_to():
    ev = Eager()
    t = ev.const(rng.standard_normal((4, 2, 3)))
    assert sum_to(ev, t, (4, 2, 3)) == t                        # unchanged: no operator
    n = len(ev.arrays)
    for shape, axes in [((2, 3), (0,)), ((4, 1, 3), (1,)), ((1, 3), (0, 1)), ((), (0, 1, 2)), ((3,), (0, 1))]:
        s = sum_to(ev, t, shape)
        assert ev.shape(s) == shape
        np.testing.assert_allclose(ev.arrays[s], ev.arrays[t].sum(axis=axes).reshape(shape), rtol=1e-14)
    assert len(ev.arrays) > n
    with pytest.raises(ShapeError, match="does not broadcast") as e:
        sum_to(ev, t, (4, 3))
    one_line_error(e)
    with pytest.raises(ShapeError):
        sum_to(ev, t, (1, 4, 2, 3))


def test_gradients_emit_only_registered_operators():
    class Recorder(Eager):
        def apply(self, op, inputs, name=None, **attrs):
            self.ops.append(op)
            return super().apply(op, inputs, name, **attrs)
    for op, arrays, attrs in [("binary", [rng.standard_normal((4, 1, 3)), rng.standard_normal((2, 3)) + 3], {"fn": f})
                              for f in BINARY_FNS] + [
            ("reduce", [rng.standard_normal((3, 4))], {"fn": f, "axes": (0,)}) for f in REDUCE_FNS]:
        ev = Recorder()
        ev.ops = []
        ids = [ev.const(a) for a in arrays]
        outs = ev.apply(op, ids, **attrs)
        node = SimpleNamespace(op=op, attrs=ev.last_attrs, inputs=tuple(ids), outputs=tuple(outs))
        registry.get(op).gradient(ev, node, [ev.const(np.ones(ev.shape(outs[0])))], [True] * len(ids))
        assert all(o in registry.REGISTRY for o in ev.ops)


# ---------------------------------------------------------------------- against torch.autograd

def _ours(op, arrays, attrs, dy, wanted):
    ev = Eager()
    ids = [ev.const(a) for a in arrays]
    outs = ev.apply(op, ids, **attrs)
    node = SimpleNamespace(op=op, attrs=ev.last_attrs, inputs=tuple(ids), outputs=tuple(outs))
    grads = registry.get(op).gradient(ev, node, [ev.const(dy)], wanted)
    return ev.arrays[outs[0]], [ev.arrays[g] if g is not None else None for g in grads]


def _close(ours, theirs):
    theirs = theirs.detach().numpy()
    assert ours.shape == theirs.shape
    scale = max(float(np.max(np.abs(theirs))) if theirs.size else 0.0, 1e-300)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12 * scale)


@pytest.mark.parametrize("fn", BINARY_FNS)
@pytest.mark.parametrize("a, b", [((4, 1, 3), (2, 3)), ((3,), (5, 2, 3)), ((), (2, 3))])
def test_binary_gradients_equal_torchs(fn, a, b):
    torch = pytest.importorskip("torch")
    x, y = rng.standard_normal(a), rng.standard_normal(b)
    if fn in ("maximum", "minimum"):
        x, y = np.round(x), np.round(y)                 # ties
    dy = rng.standard_normal(np.broadcast_shapes(a, b))
    out, grads = _ours("binary", [x, y], {"fn": fn}, dy, [True, True])
    tx, ty = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    f = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum,
         "minimum": torch.minimum}[fn]
    ty_ = f(tx, ty)
    _close(out, ty_)
    for ours, theirs in zip(grads, torch.autograd.grad(ty_, [tx, ty], torch.tensor(dy))):
        _close(ours, theirs)


def test_where_and_broadcast_to_gradients_equal_torchs():
    torch = pytest.importorskip("torch")
    c = rng.random((4, 1, 3)) < 0.5
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3,))
    dy = rng.standard_normal((4, 2, 3))
    _, grads = _ours("where", [c, a, b], {}, dy, [False, True, True])
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    want = torch.autograd.grad(torch.where(torch.tensor(c), ta, tb), [ta, tb], torch.tensor(dy))
    assert grads[0] is None
    _close(grads[1], want[0])
    _close(grads[2], want[1])
    x = rng.standard_normal((3, 1))
    dy = rng.standard_normal((2, 3, 4))
    _, (gx,) = _ours("broadcast_to", [x], {"shape": (2, 3, 4)}, dy, [True])
    tx = torch.tensor(x, requires_grad=True)
    _close(gx, torch.autograd.grad(tx.expand(2, 3, 4), [tx], torch.tensor(dy))[0])


@pytest.mark.parametrize("fn", REDUCE_FNS)
@pytest.mark.parametrize("axes, keepdim", [((1,), False), ((0, 2), True), ((-1,), False)])
def test_reduce_gradients_equal_torchs(fn, axes, keepdim):
    torch = pytest.importorskip("torch")
    x = np.round(rng.standard_normal((3, 4, 5)))        # ties, three-way ones too
    out, (gx,) = _ours("reduce", [x], {"fn": fn, "axes": axes, "keepdim": keepdim},
                       dy := rng.standard_normal(run_op("reduce", [x], fn=fn, axes=axes, keepdim=keepdim)[0].shape),
                       [True])
    tx = torch.tensor(x, requires_grad=True)
    f = {"sum": torch.sum, "mean": torch.mean, "amax": torch.amax, "amin": torch.amin}[fn]
    ty = f(tx, dim=list(axes), keepdim=keepdim)
    _close(out, ty)
    _close(gx, torch.autograd.grad(ty, [tx], torch.tensor(dy))[0])


# ---------------------------------------------------------------------- CUDA kernels on the host

def test_every_broadcast_case_runs_on_the_host_emulation():
    """Every broadcast case of tests/ops/cuda_cases.py (every fn, float32 and float64), not just
    the cheapest per kernel that test_cuda_emulated picks, against its numpy twin."""
    from . import cuda_emulator
    if not cuda_emulator.available():
        pytest.skip("g++ is needed to build the host emulation")
    from .cuda_cases import all_cases
    from .test_cuda_emulated import emulation_failures
    cases = [c for c in all_cases() if c.op in FAMILY]
    assert {c.op for c in cases} == FAMILY
    assert {c.attrs["fn"] for c in cases if c.op == "binary"} == set(BINARY_FNS)
    assert {c.attrs["fn"] for c in cases if c.op == "reduce"} == set(REDUCE_FNS)
    failures = emulation_failures(cases)
    assert not failures, "\n".join(failures)
