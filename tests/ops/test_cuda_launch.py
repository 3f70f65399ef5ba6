"""Launch descriptors (ops/cuda_launch.py and every operator's cuda_launches), checked without a GPU:
arguments refer to real inputs, outputs and scratch regions, scalars are numpy scalars of a
fixed width, and the grids cover every element each kernel is responsible for."""
import math

import numpy as np
import pytest

import ops
from ops.cuda_launch import MAX_GRID_X, MAX_GRID_YZ, THREADS, Launch, copy_rows, gemm_tiles, split_k
from ops.registry import OpError
from ops.workspace import WORKSPACE_ALIGNMENT, workspace_bytes, workspace_offsets

from .cuda_cases import all_cases, case, spec

CASES = all_cases()


def test_every_operator_has_cases():
    assert {c.op for c in CASES} == set(ops.REGISTRY)


def _numel_of(c, ref, ws_sizes):
    kind, i = ref
    if kind == "out":
        return math.prod(c.outs[i].shape)
    return ws_sizes[i] // np.dtype(c.outs[0].dtype).itemsize


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_launch_descriptors_are_consistent(c):
    decl = c.decl
    launches = decl.cuda_launches(c.attrs, c.ins, c.outs)
    ws_sizes = tuple(decl.cuda_workspaces(c.attrs, c.ins, c.outs))
    assert decl.workspace(c.attrs, c.ins, c.outs) == workspace_bytes(ws_sizes)
    assert launches and all(isinstance(l, Launch) for l in launches)
    limits = {"in": len(c.ins), "out": len(c.outs), "workspace": len(ws_sizes)}
    written = set()
    covered: dict = {}
    for l in launches:
        assert l.block == (THREADS, 1, 1) and l.shmem >= 0, l
        assert all(type(d) is int for d in (*l.grid, *l.block, l.shmem)), f"{l.kernel}: LaunchConfig takes ints"
        assert 1 <= l.grid[0] <= MAX_GRID_X and all(1 <= d <= MAX_GRID_YZ for d in l.grid[1:]), l
        for a in l.args:
            if isinstance(a, tuple):
                kind, i = a
                assert kind in limits and 0 <= i < limits[kind], f"{l.kernel}: bad reference {a}"
                if kind == "out":
                    written.add(i)
            else:
                # A Python int would go as a pointer, a float as a double, a bool as a pointer.
                assert isinstance(a, np.generic) and not isinstance(a, np.bool_), \
                    f"{l.kernel}: argument {a!r} ({type(a).__name__}) is not a numpy scalar"
        cov = l.covers
        assert cov.target in l.args, f"{l.kernel}: covers {cov.target}, which it is not passed"
        assert len(cov.extents) == len(cov.per_block) <= 3
        for d, (items, per) in enumerate(zip(cov.extents, cov.per_block)):
            if per:
                assert l.grid[d] * per >= items, f"{l.kernel}: grid axis {d} ({l.grid[d]} x {per}) misses items"
                assert (l.grid[d] - 1) * per < max(items, 1), f"{l.kernel}: grid axis {d} has idle blocks"
        for d in range(len(cov.extents), 3):
            assert l.grid[d] == 1
        n = math.prod(cov.extents) * cov.elements_per_item
        full = _numel_of(c, cov.target, ws_sizes)
        if cov.piece:
            covered[cov.target] = covered.get(cov.target, 0) + n
        else:
            assert n == full, f"{l.kernel}: covers {n} of {cov.target}'s {full} elements"
    for target, n in covered.items():
        assert n == _numel_of(c, target, ws_sizes), f"pieces cover {n} elements of {target}"
    assert written == set(range(len(c.outs))), f"outputs {set(range(len(c.outs))) - written} never written"


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_kernel_names_follow_the_dtype(c):
    for l in c.decl.cuda_launches(c.attrs, c.ins, c.outs):
        is_f64 = "_f64" in l.kernel
        float_dtypes = {np.dtype(t.dtype) for t in (*c.ins, *c.outs) if np.dtype(t.dtype).kind == "f"}
        if l.kernel in ("copy_rows", "fill_b32", "fill_b64"):
            continue
        assert is_f64 == (np.dtype(np.float64) in float_dtypes), l.kernel


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(64, 24), (8, 3, 64, 64)])
def test_batch_norm_split_launches_batch_norms_kernels(shape, dtype):
    """batch_norm_stats' launches then batch_norm_apply's are batch_norm's, argument for
    argument once their tensors are named as batch_norm's, with the same scratch."""
    c = shape[1]
    fused = case("batch_norm", [spec(shape, dtype)] + [spec((c,), dtype)] * 4, eps=1e-3, momentum=0.7)
    stats = case("batch_norm_stats", [fused.ins[0], fused.ins[3], fused.ins[4]], eps=1e-3, momentum=0.7)
    apply = case("batch_norm_apply", list(fused.ins[:3]) + list(fused.outs[1:3]))
    as_fused = {"stats": {("in", 0): ("in", 0), ("in", 1): ("in", 3), ("in", 2): ("in", 4),
                          **{("out", k): ("out", k + 1) for k in range(4)}},
                "apply": {("in", 0): ("in", 0), ("in", 1): ("in", 1), ("in", 2): ("in", 2), ("in", 3): ("out", 1),
                          ("in", 4): ("out", 2), ("out", 0): ("out", 0)}}

    def renamed(launches, names):
        def ref(a):
            return names.get(a, a) if isinstance(a, tuple) and a[0] != "workspace" else a
        return [(l.kernel, l.grid, l.block, l.shmem, [ref(a) for a in l.args], ref(l.covers.target))
                for l in launches]

    split = (renamed(stats.decl.cuda_launches(stats.attrs, stats.ins, stats.outs), as_fused["stats"])
             + renamed(apply.decl.cuda_launches(apply.attrs, apply.ins, apply.outs), as_fused["apply"]))
    want = renamed(fused.decl.cuda_launches(fused.attrs, fused.ins, fused.outs), {})
    assert len(split) == len(want) == 5
    for got, expected in zip(split, want):
        assert got[:4] == expected[:4] and got[5] == expected[5] and len(got[4]) == len(expected[4])
        assert all(type(a) is type(b) and a == b for a, b in zip(got[4], expected[4])), got[0]
    assert stats.decl.cuda_workspaces(stats.attrs, stats.ins, stats.outs) == \
        fused.decl.cuda_workspaces(fused.attrs, fused.ins, fused.outs)
    assert apply.decl.cuda_workspaces(apply.attrs, apply.ins, apply.outs) == ()


def test_workspace_regions_are_aligned():
    assert workspace_offsets([10, 300, 1]) == [0, 256, 768]
    assert workspace_bytes([10, 300, 1]) == 1024
    assert workspace_bytes([]) == 0
    assert all(o % WORKSPACE_ALIGNMENT == 0 for o in workspace_offsets([3, 5, 7]))


def test_tiles_and_split_k():
    assert gemm_tiles(4096, 4096).suffix == "" and gemm_tiles(64, 64).suffix == "_s"
    splits, chunk = split_k(gemm_tiles(32, 288), 32, 288, 1 << 16)
    assert splits > 1 and chunk % 8 == 0 and (splits - 1) * chunk < 1 << 16 <= splits * chunk
    assert split_k(gemm_tiles(32, 288), 32, 288, 100) == (1, 104)


def test_split_k_is_used_for_long_reductions():
    c = case("conv2d_grad_weight", [(16, 32, 16, 16), (16, 32, 16, 16)], padding=1, kernel_hw=(3, 3))
    names = [l.kernel for l in c.decl.cuda_launches(c.attrs, c.ins, c.outs)]
    assert names == ["conv2d_grad_weight_gemm_s", "conv2d_splitk_reduce"]
    assert c.decl.workspace(c.attrs, c.ins, c.outs) > 0


def test_thin_groups_use_direct_kernels():
    c = case("conv2d", [(2, 8, 9, 7), (8, 1, 3, 3)], padding=1, groups=8)
    assert [l.kernel for l in c.decl.cuda_launches(c.attrs, c.ins, c.outs)] == ["conv2d_fwd_direct"]


def test_long_sums_keep_left_to_right_order():
    c = case("sum_n", [(4,)] * 16)
    launches = c.decl.cuda_launches(c.attrs, c.ins, c.outs)
    operands = [[a for a in l.args[1:9]][:int(l.args[9])] for l in launches]
    assert operands[0] == [("in", i) for i in range(8)]
    assert operands[1] == [("out", 0)] + [("in", i) for i in range(8, 15)]
    assert operands[2] == [("out", 0), ("in", 15)]


def test_copy_rows_passes_bytes():
    l = copy_rows(("out", 0), ("in", 1), 3, 5, 9, 5, 4, 0, itemsize=8)
    assert [int(a) for a in l.args[2:]] == [3, 40, 72, 40, 32, 0]
    assert all(isinstance(a, np.int64) for a in l.args[2:])


def test_unsupported_dtypes_are_refused_with_a_reason():
    c = case("fill", [], shape=(3,), dtype="int16", value=1)
    with pytest.raises(OpError, match="4- and 8-byte"):
        c.decl.cuda_launches(c.attrs, c.ins, c.outs)
    with pytest.raises(OpError, match="no CUDA kernel for dtype float16"):
        c = case("relu", [(3,)])
        c.decl.cuda_launches(c.attrs, [type(c.ins[0])(shape=(3,), dtype=np.dtype("float16"))],
                             [type(c.ins[0])(shape=(3,), dtype=np.dtype("float16"))])
