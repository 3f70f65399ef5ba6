"""Every CUDA kernel against its numpy twin (the operator's ``compute``), on fresh random inputs.

GPU only (marked ``gpu``; skipped where detect_gpu finds no device). Operators whose CUDA
kernels follow numpy's operation order exactly must give numpy's bits; the others (sums
in another order, exp/log/tanh, fused multiply-adds in GEMMs) must agree to fp32 (or
fp64) rounding relative to the output's scale. Outputs start as 0xFF bytes (NaN), so an
element a kernel never writes fails the comparison."""
import itertools
import zlib
from types import SimpleNamespace

import numpy as np
import pytest

from engine.backends.detect import detect_gpu
from engine.program import COMPUTE

from . import transformer_cases
from .cuda_cases import all_cases, case

GPUS, WHY = detect_gpu()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPUS == 0, reason=f"no GPU ({WHY})")]

# Kernels written in numpy's evaluation order with no FMA contraction: bit-identical.
EXACT = {"relu", "relu_grad", "sigmoid_grad", "tanh_grad", "add", "accumulate", "accumulate_state", "mul", "scale", "sum_n", "fill", "sgd_update",
         "concat", "split", "reshape", "max_pool2d", "max_pool2d_grad", "avg_pool2d", "avg_pool2d_grad",
         "global_avg_pool_grad", "softmax_cross_entropy_grad", "transpose", "embedding", "embedding_grad",
         "batch_norm_apply"}
EXACT |= {"binary", "binary_grad", "where", "broadcast_to", "reduce_grad"}     # ops/broadcast.py
EXACT |= {"cast", "slice", "slice_grad"}       # ops/math.py's copies (its arithmetic calls libm)
EXACT |= {"gather", "gather_grad", "index_select", "index_select_grad"}     # ops/indexing.py
EXACT |= {"compare", "compare_scalar", "logical", "logical_not", "reduce_bool"}     # ops/logic.py
TOLERANCE = {np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-12}
_ids = itertools.count()


@pytest.fixture(scope="module")
def backend():
    from engine.backends.cuda import CudaBackend
    be = CudaBackend()
    yield be
    be.close()


def make_inputs(c, rng) -> list[np.ndarray]:
    """Random inputs that the operator accepts (positive variances, valid labels, real maxima)."""
    if c.op in transformer_cases.OPS:
        return transformer_cases.make_inputs(c, rng)
    if c.op in INDEXING_OPS:
        return _indexing_inputs(c, rng)
    if c.op in LOGIC_OPS:
        return _logic_inputs(c, rng)
    if c.op in ("nll_loss", "nll_loss_grad"):      # labels in [0, C), every third one ignore_index
        at, classes = (1, c.ins[0].shape[1]) if c.op == "nll_loss" else (0, c.attrs["classes"])
        arrays = [rng.standard_normal(t.shape).astype(t.dtype) for t in c.ins]
        labels = rng.integers(0, classes, size=c.ins[at].shape)
        labels[::3] = c.attrs["ignore_index"]
        arrays[at] = labels.astype(c.ins[at].dtype)
        return arrays
    arrays = []
    for i, t in enumerate(c.ins):
        dt = np.dtype(t.dtype)
        if dt.kind in "iu":
            arrays.append(rng.integers(0, c.ins[0].shape[1], size=t.shape).astype(dt))
        else:
            arrays.append(rng.standard_normal(t.shape).astype(dt))
    positive = {"batch_norm": 4, "batch_norm_stats": 2, "batch_norm_grad": 3, "batch_norm_apply": 4}.get(c.op)
    if positive is not None:                     # a running variance or an invstd
        arrays[positive] = np.abs(arrays[positive]) + arrays[positive].dtype.type(0.5)
    if c.op in ("unary", "unary_grad", "scalar", "scalar_grad"):     # ops/math.py: log, sqrt, pow of x > 0
        arrays[0] = np.abs(arrays[0]) + arrays[0].dtype.type(0.25)
    if c.op == "softmax_cross_entropy_grad":
        e = np.exp(arrays[0])
        arrays[0] = (e / e.sum(axis=1, keepdims=True)).astype(arrays[0].dtype)
    if c.op == "max_pool2d_grad":                 # y must be the pooling of x
        y = np.empty(c.ins[1].shape, c.ins[1].dtype)
        pool = case("max_pool2d", [c.ins[0]], **{k: c.attrs[k] for k in ("kernel", "stride", "padding")})
        pool.decl.compute(pool.attrs, [arrays[0]], [y])
        arrays[1] = y
    arrays = _broadcast_inputs(c, rng, arrays)
    return arrays


INDEXING_OPS = ("gather", "gather_grad", "index_select", "index_select_grad")


def _indexing_inputs(c, rng):
    """ops/indexing.py: indices valid for the indexed axis (drawn from a small range, so repeated)."""
    arrays = [rng.standard_normal(t.shape).astype(t.dtype) for t in c.ins]
    at = 1 if c.op in ("gather", "index_select") else 0
    shape = c.ins[0].shape if at == 1 else c.attrs["shape"]
    size = shape[c.attrs["axis"] % len(shape)]
    arrays[at] = rng.integers(0, size, size=c.ins[at].shape).astype(c.ins[at].dtype)
    return arrays


def _broadcast_inputs(c, rng, arrays):
    """ops/broadcast.py: conditions half true, ties for maximum/minimum, and for reduce_grad
    a y that is x's maximum, with ties."""
    for i, t in enumerate(c.ins):
        if np.dtype(t.dtype) == np.bool_ or (c.op == "where" and i == 0):
            arrays[i] = (rng.random(t.shape) < 0.5).astype(t.dtype)
    if c.op == "binary_grad":
        arrays[0] = np.round(arrays[0])
        arrays[1] = np.round(arrays[1])
    if c.op == "reduce_grad":
        x = np.round(arrays[0] * 2)
        arrays[0] = x
        arrays[1] = np.amax(x, axis=c.attrs["axes"], keepdims=c.attrs["keepdim"]).astype(x.dtype)
    return arrays


LOGIC_OPS = ("compare", "compare_scalar", "logical", "logical_not", "reduce_bool")


def _logic_inputs(c, rng):
    """ops/logic.py: bools half true; floats on a grid of quarters in [-2, 2] (ties with each
    other and with compare_scalar's 0.75) with one NaN; integers in [-3, 3]."""
    arrays = []
    for t in c.ins:
        dt = np.dtype(t.dtype)
        if dt == np.bool_:
            arrays.append(rng.random(t.shape) < 0.5)
        elif dt.kind in "iu":
            arrays.append(rng.integers(-3, 4, size=t.shape).astype(dt))
        else:
            a = (rng.integers(-8, 9, size=t.shape) / 4).astype(dt)
            if a.size > 1:
                a.flat[1] = np.nan
            arrays.append(a)
    return arrays


def numpy_outputs(c, arrays) -> list[np.ndarray]:
    ys = [np.full(t.shape, np.nan if np.dtype(t.dtype).kind == "f" else -1, dtype=t.dtype) for t in c.outs]
    c.decl.compute(c.attrs, [a.copy() for a in arrays], ys)
    return ys


def run_on_gpu(be, c, arrays, shift_elements: int = 0, alias: dict | None = None) -> list[np.ndarray]:
    """Place inputs and outputs in a fresh arena (256-byte aligned, then shifted by
    ``shift_elements``), run the operator's launches, read the outputs back. ``alias``
    maps an output to the input whose memory it shares (in-place updates)."""
    alias = alias or {}
    specs = list(c.ins) + [t for k, t in enumerate(c.outs) if k not in alias]
    offsets, at = [], 0
    for t in specs:
        offsets.append(at + shift_elements * np.dtype(t.dtype).itemsize)
        at += -(-(int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize + 64) // 256) * 256
    scratch = c.decl.workspace(c.attrs, c.ins, c.outs)
    be.allocate_arena(at + 256 + scratch, scratch)
    views = [be.view(o, t.shape, t.dtype) for o, t in zip(offsets, specs)]
    ins = views[:len(c.ins)]
    rest = iter(views[len(c.ins):])
    outs = [ins[alias[k]] if k in alias else next(rest) for k in range(len(c.outs))]
    for v, a in zip(ins, arrays):
        be.write(v, a)
    be.launch(COMPUTE, SimpleNamespace(op=c.op, attrs=c.attrs, id=next(_ids)), ins, outs)
    be.synchronize()
    return [be.read(v) for v in outs]


def assert_matches(c, got, want):
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"output {k}"
        if c.op in EXACT or w.dtype.kind != "f":
            np.testing.assert_array_equal(g, w, err_msg=f"{c.id} output {k} differs from numpy's bits")
        else:
            tol = TOLERANCE[w.dtype]
            scale = max(1.0, float(np.max(np.abs(w))) if w.size else 1.0)
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale, err_msg=f"{c.id} output {k}")


@pytest.mark.parametrize("c", all_cases(), ids=lambda c: c.id)
def test_kernel_matches_numpy(backend, c):
    rng = np.random.default_rng(zlib.crc32(c.id.encode()))
    arrays = make_inputs(c, rng)
    assert_matches(c, run_on_gpu(backend, c, arrays), numpy_outputs(c, arrays))


VECTOR_PATHS = [case("relu", [(1003,)]), case("add", [(2, 501), (2, 501)]), case("sum_n", [(1001,)] * 3),
                case("fill", [], shape=(1001,), dtype="float32", value=2.5),
                case("sgd_update", [(4099,), (4099,), (4099,)], lr=0.1, momentum=0.9, weight_decay=1e-4),
                case("concat", [(3, 2), (3, 5)], axis=-1), case("reshape", [(6, 35)], shape=(-1, 7))]


@pytest.mark.parametrize("c", VECTOR_PATHS, ids=lambda c: c.id)
def test_unaligned_tensors_take_the_scalar_path(backend, c):
    arrays = make_inputs(c, np.random.default_rng(1))
    assert_matches(c, run_on_gpu(backend, c, arrays, shift_elements=1), numpy_outputs(c, arrays))


def test_in_place_updates(backend):
    """The planner may give a state's next value its current value's object."""
    c = case("sgd_update", [(4099,), (4099,), (4099,)], lr=0.1, momentum=0.9, weight_decay=1e-4)
    arrays = make_inputs(c, np.random.default_rng(2))
    assert_matches(c, run_on_gpu(backend, c, arrays, alias={0: 0, 1: 2}), numpy_outputs(c, arrays))
    c = case("batch_norm", [(8, 3, 5, 5), (3,), (3,), (3,), (3,)])
    arrays = make_inputs(c, np.random.default_rng(3))
    assert_matches(c, run_on_gpu(backend, c, arrays, alias={3: 3, 4: 4}), numpy_outputs(c, arrays))
    c = case("batch_norm_stats", [(8, 3, 5, 5), (3,), (3,)])
    arrays = make_inputs(c, np.random.default_rng(3))
    assert_matches(c, run_on_gpu(backend, c, arrays, alias={2: 1, 3: 2}), numpy_outputs(c, arrays))
    c = case("accumulate", [(4099,), (4099,)])                  # a running gradient sum
    arrays = make_inputs(c, np.random.default_rng(4))
    assert_matches(c, run_on_gpu(backend, c, arrays, alias={0: 0}), numpy_outputs(c, arrays))


def test_kernels_are_deterministic(backend):
    """Reductions (split-K GEMM, batch-norm statistics, the loss) give the same bits every run."""
    for c in (case("conv2d_grad_weight", [(16, 32, 16, 16), (16, 32, 16, 16)], padding=1, kernel_hw=(3, 3)),
              case("batch_norm_grad", [(8, 3, 64, 64), (3,), (3,), (3,), (8, 3, 64, 64)]),
              case("fully_connected_grad_weight", [(8192, 24), (8192, 40)], has_bias=True)):
        arrays = make_inputs(c, np.random.default_rng(4))
        first = run_on_gpu(backend, c, arrays)
        for _ in range(3):
            for a, b in zip(first, run_on_gpu(backend, c, arrays)):
                np.testing.assert_array_equal(a, b)
