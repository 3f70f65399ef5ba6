from types import SimpleNamespace

import numpy as np
import pytest

import ops.norm  # noqa: F401  (registers the operators)
from ops import registry
from ops.registry import OpError, ShapeError

from .opcheck import Eager, check_finite_differences, check_gradient, run_op

rng = np.random.default_rng(0)


def bn_inputs(shape, dtype=np.float64):
    c = shape[1]
    return [rng.standard_normal(shape).astype(dtype),
            (1 + 0.5 * rng.standard_normal(c)).astype(dtype),
            rng.standard_normal(c).astype(dtype),
            rng.standard_normal(c).astype(dtype),
            (1 + rng.random(c)).astype(dtype)]


@pytest.mark.parametrize("shape", [(4, 3), (7, 1), (2, 3, 4, 5), (3, 2, 1, 3)])
def test_batch_norm_gradient(shape):
    grads = check_gradient("batch_norm", bn_inputs(shape), wrt=[0, 1, 2])
    assert grads[3] is None and grads[4] is None


def test_batch_norm_gradient_honours_wanted():
    grads = check_gradient("batch_norm", bn_inputs((5, 4)), wrt=[1])
    assert grads[0] is None and grads[2] is None


def test_batch_norm_forward_matches_formula():
    x, gamma, beta, rmean, rvar = bn_inputs((4, 3, 2, 5))
    y, mean, invstd, mean_next, var_next = run_op("batch_norm", [x, gamma, beta, rmean, rvar],
                                                  eps=1e-3, momentum=0.8)
    axes = (0, 2, 3)
    expect_mean = x.mean(axis=axes)
    var = x.var(axis=axes)
    per_c = (1, 3, 1, 1)
    xhat = (x - expect_mean.reshape(per_c)) / np.sqrt(var.reshape(per_c) + 1e-3)
    np.testing.assert_allclose(y, xhat * gamma.reshape(per_c) + beta.reshape(per_c), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mean, expect_mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(invstd, 1 / np.sqrt(var + 1e-3), rtol=1e-12)
    # Running statistics: the variance is the unbiased one.
    np.testing.assert_allclose(mean_next, 0.8 * rmean + 0.2 * expect_mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(var_next, 0.8 * rvar + 0.2 * x.var(axis=axes, ddof=1), rtol=1e-12)


def test_batch_norm_2d_float32():
    ins = bn_inputs((16, 6), np.float32)
    y, mean, invstd, mean_next, var_next = run_op("batch_norm", ins)
    assert all(a.dtype == np.float32 for a in (y, mean, invstd, mean_next, var_next))
    np.testing.assert_allclose(y.mean(axis=0), ins[2], atol=1e-5)
    np.testing.assert_allclose(y.std(axis=0), np.abs(ins[1]), rtol=1e-3)
    np.testing.assert_allclose(var_next, 0.9 * ins[4] + 0.1 * ins[0].var(axis=0, ddof=1), rtol=1e-5)
    assert np.array_equal(run_op("batch_norm", ins)[0], y)   # deterministic


def test_batch_norm_declares_state_outputs():
    decl = registry.get("batch_norm")
    assert decl.state_outputs == {3: 3, 4: 4}
    assert not registry.get("batch_norm_grad").differentiable


def test_batch_norm_statistics_carry_no_gradient():
    ev = Eager()
    ids = [ev.const(a) for a in bn_inputs((4, 2))]
    outs = ev.apply("batch_norm", ids)
    dys = [None, ev.const(np.ones(2)), None, None, None]
    node = SimpleNamespace(op="batch_norm", attrs=ev.last_attrs, inputs=tuple(ids), outputs=outs)
    with pytest.raises(OpError, match="only output 0"):
        registry.get("batch_norm").gradient(ev, node, dys, [True] * 5)


def test_batch_norm_errors():
    decl = registry.get("batch_norm")
    attrs = decl.canon({})
    assert attrs == {"eps": 1e-5, "momentum": 0.9}
    x3 = bn_inputs((2, 3, 4))
    with pytest.raises(ShapeError, match=r"\[N,C\] or \[N,C,H,W\]"):
        decl.infer(attrs, x3)
    bad_gamma = bn_inputs((4, 3))
    bad_gamma[1] = np.ones(4)
    with pytest.raises(ShapeError, match=r"gamma must have shape \(3,\)"):
        decl.infer(attrs, bad_gamma)
    with pytest.raises(ShapeError, match="fewer than 2 values per channel"):
        decl.infer(attrs, bn_inputs((1, 3, 1, 1)))
    with pytest.raises(ShapeError, match="dtypes"):
        decl.infer(attrs, bn_inputs((4, 3))[:4] + [np.ones(3, np.float32)])
    with pytest.raises(OpError, match="eps"):
        decl.canon({"eps": 0})
    with pytest.raises(OpError, match="unknown"):
        decl.canon({"epsilon": 1e-3})


# ---------------------------------------------------------------- batch_norm split: stats + apply
def run_pair(x, gamma, beta, running_mean, running_var, **attrs):
    """batch_norm_stats then batch_norm_apply on its statistics: (y, mean, invstd, running')."""
    mean, invstd, mean_next, var_next = run_op("batch_norm_stats", [x, running_mean, running_var], **attrs)
    (y,) = run_op("batch_norm_apply", [x, gamma, beta, mean, invstd])
    return [y, mean, invstd, mean_next, var_next]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(16, 6), (7, 1), (4, 3, 5, 5), (3, 2, 1, 3)])
def test_split_gives_batch_norm_bits(shape, dtype):
    ins = bn_inputs(shape, dtype)
    ins[0] = (3 + 5 * ins[0]).astype(dtype)            # an offset mean, so rounding differs by order
    for attrs in ({}, {"eps": 1e-3, "momentum": 0.7}):
        fused = run_op("batch_norm", ins, **attrs)
        split = run_pair(*ins, **attrs)
        for k, (a, b) in enumerate(zip(fused, split)):
            assert a.dtype == b.dtype == dtype and np.array_equal(a, b), f"output {k}"


def test_split_in_place_running_statistics_give_batch_norm_bits():
    """The running statistics' next values over their current ones (inplace {2: 1, 3: 2})."""
    x, gamma, beta, rmean, rvar = bn_inputs((6, 4, 3, 3), np.float32)
    want = run_op("batch_norm", [x, gamma, beta, rmean, rvar])
    ys = [np.empty(4, np.float32), np.empty(4, np.float32), rmean.copy(), rvar.copy()]
    registry.get("batch_norm_stats").compute({"eps": 1e-5, "momentum": 0.9}, [x, ys[2], ys[3]], ys)
    assert np.array_equal(ys[2], want[3]) and np.array_equal(ys[3], want[4])


def pair_gradient(inputs, wrt, seed=0, max_points=40, eps=1e-6, tol=1e-6):
    """batch_norm_apply's gradient of sum <dy, y(x, gamma, beta)>, y through the statistics of x
    too, against float64 central finite differences of the pair (opcheck.finite_difference_check)."""
    rng = np.random.default_rng(seed)
    ev = Eager()
    x, gamma, beta, rmean, rvar = (ev.const(a) for a in inputs)
    mean, invstd, _, _ = ev.apply("batch_norm_stats", [x, rmean, rvar])
    (y,) = ev.apply("batch_norm_apply", [x, gamma, beta, mean, invstd])
    dy = ev.arrays[ev.const(rng.standard_normal(ev.shape(y)))]
    node = SimpleNamespace(op="batch_norm_apply", attrs={}, inputs=(x, gamma, beta, mean, invstd), outputs=(y,))
    wanted = [i in wrt for i in range(5)]
    grads = registry.get("batch_norm_apply").gradient(ev, node, [ev.const(dy)], wanted)
    assert grads[3] is None and grads[4] is None
    check_finite_differences("batch_norm_stats + batch_norm_apply",
                             lambda xs: float(np.sum(dy * run_pair(*xs)[0])), inputs,
                             {i: ev.arrays[grads[i]] for i in wrt}, rng, max_points, eps, tol)
    return grads


@pytest.mark.parametrize("shape", [(4, 3), (7, 1), (2, 3, 4, 5), (3, 2, 1, 3)])
def test_split_gradient_is_batch_norm_gradient_through_the_statistics(shape):
    pair_gradient(bn_inputs(shape), wrt=[0, 1, 2])


def test_split_gradient_honours_wanted():
    grads = pair_gradient(bn_inputs((5, 4)), wrt=[1])
    assert grads[0] is None and grads[2] is None


def test_split_declarations():
    stats, apply = registry.get("batch_norm_stats"), registry.get("batch_norm_apply")
    assert stats.state_outputs == stats.inplace == {2: 1, 3: 2} and not stats.recomputable
    assert apply.recomputable and not apply.state_outputs and not apply.inplace
    assert stats.canon({}) == {"eps": 1e-5, "momentum": 0.9} and apply.canon({}) == {}


def test_split_costs_add_up_to_batch_norm():
    for shape in [(64, 24), (8, 3, 64, 64)]:
        ins = [SimpleNamespace(shape=s, dtype=np.dtype(np.float32)) for s in (shape,) + ((shape[1],),) * 4]
        fused = registry.get("batch_norm")
        outs = [SimpleNamespace(shape=s, dtype=d) for s, d in fused.infer({}, ins)]
        stats = registry.get("batch_norm_stats").cost({}, [ins[0], ins[3], ins[4]], outs[1:])
        apply = registry.get("batch_norm_apply").cost({}, ins[:3] + outs[1:3], outs[:1])
        whole = fused.cost({}, ins, outs)
        assert stats.flops + apply.flops == whole.flops and stats.bytes + apply.bytes == whole.bytes
        assert stats.flops == 4 * np.prod(shape) and apply.flops == 3 * np.prod(shape)


def test_stats_outputs_carry_no_gradient():
    ev = Eager()
    a = bn_inputs((4, 2))
    x, rmean, rvar = (ev.const(v) for v in (a[0], a[3], a[4]))
    outs = ev.apply("batch_norm_stats", [x, rmean, rvar])
    node = SimpleNamespace(op="batch_norm_stats", attrs=ev.last_attrs, inputs=(x, rmean, rvar), outputs=outs)
    decl = registry.get("batch_norm_stats")
    assert decl.gradient(ev, node, [None] * 4, [True] * 3) == [None] * 3
    with pytest.raises(OpError, match="batch_norm_apply's gradient"):
        decl.gradient(ev, node, [ev.const(np.ones(2)), None, None, None], [True] * 3)


def test_split_errors():
    stats, apply = registry.get("batch_norm_stats"), registry.get("batch_norm_apply")
    x, gamma, beta, rmean, rvar = bn_inputs((4, 3))
    with pytest.raises(ShapeError, match=r"\[N,C\] or \[N,C,H,W\]"):
        stats.infer({}, [np.ones((2, 3, 4)), rmean, rvar])
    with pytest.raises(ShapeError, match=r"running_var must have shape \(3,\)"):
        stats.infer({}, [x, rmean, np.ones(4)])
    with pytest.raises(ShapeError, match="fewer than 2 values per channel"):
        stats.infer({}, [np.ones((1, 3, 1, 1)), rmean, rvar])
    with pytest.raises(ShapeError, match="dtypes"):
        stats.infer({}, [x, rmean, rvar.astype(np.float32)])
    with pytest.raises(ShapeError, match="floating-point"):
        stats.infer({}, [x.astype(np.int32), rmean.astype(np.int32), rvar.astype(np.int32)])
    with pytest.raises(OpError, match="momentum"):
        stats.canon({"momentum": 2})
    with pytest.raises(OpError, match="in_place"):
        stats.canon({"in_place": True})
    with pytest.raises(ShapeError, match=r"invstd must have shape \(3,\)"):
        apply.infer({}, [x, gamma, beta, rmean, np.ones(2)])
    with pytest.raises(ShapeError, match=r"\[N,C\] or \[N,C,H,W\]"):
        apply.infer({}, [np.ones(3), gamma, beta, rmean, rvar])
    with pytest.raises(ShapeError, match="dtypes"):
        apply.infer({}, [x, gamma, beta.astype(np.float32), rmean, rvar])
    with pytest.raises(OpError, match="no attributes"):
        apply.canon({"eps": 1e-3})
    # one value per channel is fine to normalize (the statistics are refused, not y's formula)
    assert apply.infer({}, [np.ones((1, 3)), gamma, beta, rmean, rvar]) == [((1, 3), np.dtype(np.float64))]


# ------------------------------------------------------------------ instance normalization

@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 2, 1, 7), (3, 1, 6, 6)])
def test_instance_norm_normalizes_each_plane_and_its_gradient_matches_finite_differences(shape):
    x = 3 + 2 * rng.standard_normal(shape)
    y, invstd = run_op("instance_norm", [x], eps=1e-5)
    mean, var = x.mean(axis=(2, 3), keepdims=True), x.var(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-5), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(invstd, 1 / np.sqrt(var[:, :, 0, 0] + 1e-5), rtol=1e-12)
    check_gradient("instance_norm", [x], max_points=30)


def test_instance_norm_keeps_only_y_and_invstd_for_its_gradient():
    """The gradient reads y and the [N,C] invstd, never x: x may be freed after the forward pass."""
    ev = Eager()
    x = ev.const(rng.standard_normal((2, 3, 4, 4)))
    y, invstd = ev.apply("instance_norm", [x])
    node = SimpleNamespace(op="instance_norm", attrs=ev.last_attrs, inputs=(x,), outputs=(y, invstd))
    dy = ev.const(rng.standard_normal((2, 3, 4, 4)))
    registry.get("instance_norm").gradient(ev, node, [dy, None], [True])
    assert ev.shape(invstd) == (2, 3)


def test_instance_norm_errors():
    inorm, grad = registry.get("instance_norm"), registry.get("instance_norm_grad")
    with pytest.raises(ShapeError, match=r"x must be \[N,C,H,W\]"):
        inorm.infer(inorm.canon({}), [np.zeros((2, 3, 4))])
    with pytest.raises(OpError, match="eps must be positive"):
        inorm.canon({"eps": 0})
    with pytest.raises(ShapeError, match=r"invstd \[N,C\]"):
        grad.infer({}, [np.zeros((2, 3, 4, 4)), np.zeros((3,)), np.zeros((2, 3, 4, 4))])
