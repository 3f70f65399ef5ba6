"""CUDA test cases of the transformer operators (attention, layer_norm, embedding, activation,
Adam), and inputs they accept: ids inside the table, non-negative second moments, a whole
step count. tests/ops/cuda_cases.py adds the cases; test_cuda_kernels.make_inputs asks here
first."""
from __future__ import annotations

import numpy as np

from .cuda_cases import case, spec

OPS = {"batch_matmul", "softmax", "softmax_grad", "transpose", "layer_norm", "layer_norm_grad", "rms_norm",
       "rms_norm_grad", "gelu", "gelu_grad", "embedding", "embedding_grad", "adam_update"}


def large_tile_cases() -> list:
    """Batched products with >= 256 output tiles of 128x128 (gemm_tiles' large tiles), one per
    transpose variant: for the GPU and the NVRTC signature checks (too big to emulate)."""
    return [case("batch_matmul", [(64, 128, 8) if not ta else (64, 8, 128), (64, 8, 512) if not tb else (64, 512, 8)],
                 transpose_a=ta, transpose_b=tb) for ta in (False, True) for tb in (False, True)]


def transformer_cases() -> list:
    """Small applications of every transformer operator (the host emulation runs them all)."""
    i32, i64 = "int32", "int64"
    return [
        case("batch_matmul", [(2, 3, 5, 4), (2, 3, 4, 6)]),
        case("batch_matmul", [(2, 3, 5, 4), (2, 3, 6, 4)], transpose_b=True),
        case("batch_matmul", [(3, 4, 5), (3, 4, 6)], transpose_a=True),
        case("batch_matmul", [(2, 4, 5), (2, 6, 4)], transpose_a=True, transpose_b=True),
        case("batch_matmul", [(4, 130, 40), (4, 40, 129)]),                 # partial 64x64 tiles
        case("softmax", [(2, 2, 5, 5)], scale=0.5, causal=True),
        case("softmax", [(3, 300)]),                                         # rows longer than a block
        case("softmax_grad", [(2, 2, 5, 5), (2, 2, 5, 5)], scale=0.5, causal=True),
        case("softmax_grad", [(3, 300), (3, 300)]),
        case("transpose", [(2, 3, 4, 5)], axes=(0, 2, 1, 3)),
        case("transpose", [(3, 7)], axes=(1, 0)),
        case("layer_norm", [(6, 10), (10,), (10,)]),
        case("layer_norm", [(2, 3, 300), (300,), (300,)]),
        case("layer_norm_grad", [(6, 10), (10,), (6,), (6,), (6, 10)]),
        case("layer_norm_grad", [(3, 300), (300,), (3,), (3,), (3, 300)]),
        case("rms_norm", [(5, 9), (9,)]),
        case("rms_norm_grad", [(5, 9), (9,), (5,), (5, 9)]),
        case("gelu", [(1003,)]),
        case("gelu_grad", [(1003,), (1003,)]),
        case("embedding", [(11, 6), spec((3, 4), i32)]),
        case("embedding", [(11, 6), spec((7,), i64)]),
        case("embedding_grad", [spec((3, 4), i32), (3, 4, 6)], vocab=11),
        case("embedding_grad", [spec((300,), i64), (300, 5)], vocab=4),      # ids in two chunks
        case("embedding_grad", [spec((5,), i32), (5, 2100)], vocab=3),       # columns in two passes
        case("adam_update", [(4099,)] * 4 + [()], lr=0.01, weight_decay=0.1),
        case("adam_update", [(7,)] * 4 + [()], weight_decay=0.01, decoupled=False),
        # exact (erf) GELU, PyTorch's default
        case("gelu", [(1003,)], approximate="none"),
        case("gelu_grad", [(1003,), (1003,)], approximate="none"),
    ]


def make_inputs(c, rng) -> list[np.ndarray]:
    arrays = [rng.standard_normal(t.shape).astype(t.dtype) if np.dtype(t.dtype).kind == "f" else None
              for t in c.ins]
    if c.op in ("embedding", "embedding_grad"):
        at, rows = (1, c.ins[0].shape[0]) if c.op == "embedding" else (0, c.attrs["vocab"])
        arrays[at] = rng.integers(0, rows, size=c.ins[at].shape).astype(c.ins[at].dtype)
    if c.op in ("layer_norm_grad", "rms_norm_grad"):
        k = 3 if c.op == "layer_norm_grad" else 2
        arrays[k] = np.abs(arrays[k]) + arrays[k].dtype.type(0.5)
    if c.op == "adam_update":
        arrays[3] = np.abs(arrays[3])
        arrays[4] = np.asarray(3, arrays[4].dtype)
    return arrays
