"""Helpers for operator tests: eager execution of one operator, and a float64
finite-difference check of its gradient declaration."""
from __future__ import annotations

import contextlib
from types import SimpleNamespace

import numpy as np

import ops  # noqa: F401  (registers every operator)
from ops import registry


class Eager:
    """A gradient builder that runs every operator as soon as it is applied.

    Outputs are pre-filled with NaN (or -1 for integers), so a kernel that leaves
    part of an output unwritten, or writes a shape its rule did not declare, fails."""

    def __init__(self):
        self.arrays: list[np.ndarray] = []

    def const(self, a) -> int:
        self.arrays.append(np.asarray(a))
        return len(self.arrays) - 1

    def shape(self, t):
        return self.arrays[t].shape

    def dtype(self, t):
        return self.arrays[t].dtype

    @contextlib.contextmanager
    def scope(self, prefix):
        yield

    def apply(self, op, inputs, name=None, **attrs):
        decl = registry.get(op)
        attrs = decl.canon(attrs)
        xs = [self.arrays[t] for t in inputs]
        specs = decl.infer(attrs, xs)
        ys = []
        for shape, dtype in specs:
            dtype = np.dtype(dtype)
            ys.append(np.full(shape, np.nan if dtype.kind == "f" else -1, dtype=dtype))
        decl.compute(attrs, xs, ys)
        for (shape, dtype), y in zip(specs, ys):
            assert y.shape == tuple(shape) and y.dtype == np.dtype(dtype), f"{op}: kernel changed an output's shape"
            if y.dtype.kind == "f":
                assert not np.isnan(y).any(), f"{op}: kernel left part of an output unwritten"
        self.last_attrs = attrs
        return tuple(self.const(y) for y in ys)


def run_op(op, arrays, **attrs):
    """Run one operator eagerly on ``arrays``; return its outputs."""
    ev = Eager()
    ids = [ev.const(a) for a in arrays]
    return [ev.arrays[t] for t in ev.apply(op, ids, **attrs)]


def check_gradient(op, arrays, attrs=None, wrt=None, outputs=(0,), seed=0,
                   max_points=40, eps=1e-6, tol=1e-6):
    """Compare ``op``'s gradient declaration with central finite differences.

    The scalar checked is sum_k <dy_k, y_k> over the chosen ``outputs`` with random
    dy_k; ``wrt`` lists the input indices to differentiate (default: all float
    inputs). Inputs must be float64. At most ``max_points`` random elements of each
    input are perturbed; the largest difference, relative to max(1, max |numeric|),
    must stay under ``tol``."""
    attrs = attrs or {}
    rng = np.random.default_rng(seed)
    arrays = [np.array(a) for a in arrays]
    if wrt is None:
        wrt = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    ev = Eager()
    ids = [ev.const(a) for a in arrays]
    outs = ev.apply(op, ids, **attrs)
    dys = [None] * len(outs)
    for k in outputs:
        dys[k] = ev.const(rng.standard_normal(ev.shape(outs[k])))
    node = SimpleNamespace(op=op, attrs=ev.last_attrs, inputs=tuple(ids), outputs=tuple(outs))
    wanted = [i in wrt for i in range(len(arrays))]
    grads = registry.get(op).gradient(ev, node, dys, wanted)
    assert len(grads) == len(arrays), f"{op}: gradient returned {len(grads)} entries for {len(arrays)} inputs"

    def objective(xs):
        ys = run_op(op, xs, **attrs)
        return sum(float(np.sum(ev.arrays[dys[k]] * ys[k])) for k in outputs)

    for i in wrt:
        assert grads[i] is not None, f"{op}: no gradient for input {i}"
    check_finite_differences(op, objective, arrays, {i: ev.arrays[grads[i]] for i in wrt}, rng, max_points, eps, tol)
    return grads


def check_finite_differences(what, objective, arrays, analytic, rng, max_points=40, eps=1e-6, tol=1e-6):
    """``analytic`` ({input index: gradient array}) against central finite differences of the
    scalar ``objective(arrays)``, at most ``max_points`` random elements of each input; the
    largest difference, relative to max(1, max |numeric|), must stay under ``tol``."""
    for i, grad in analytic.items():
        assert grad.shape == arrays[i].shape, f"{what}: gradient of input {i} has shape {grad.shape}"
        flat_idx = rng.permutation(arrays[i].size)[:max_points]
        numeric = np.empty(len(flat_idx))
        for j, fi in enumerate(flat_idx):
            plus = [a.copy() for a in arrays]
            minus = [a.copy() for a in arrays]
            plus[i].flat[fi] += eps
            minus[i].flat[fi] -= eps
            numeric[j] = (objective(plus) - objective(minus)) / (2 * eps)
        got = grad.flat[flat_idx]
        scale = max(1.0, float(np.max(np.abs(numeric))))
        err = np.max(np.abs(got - numeric)) / scale
        assert err < tol, (
            f"{what}: gradient of input {i} differs from finite differences by {err:.3g} (relative); "
            f"analytic {got[:5]} numeric {numeric[:5]}")
