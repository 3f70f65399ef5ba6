"""Launch descriptors: how an operator's CUDA kernels run, described without importing CUDA.

An operator's ``cuda_launches(attrs, ins, outs)`` returns a list of :class:`Launch`,
issued in order on one stream. Tensors in an argument list are symbolic: ``IN(i)``,
``OUT(i)`` and ``WS(i)`` (the operator's i-th scratch region, see ``cuda_workspaces``);
the backend substitutes device pointers. Every scalar is a numpy scalar of the kernel
parameter's exact C type (``np.int32``, ``np.int64``, ``np.float32``...), never a Python
int or float, which cuda.core would pass as an 8-byte pointer or a double.

Each launch also states what its grid covers (``Coverage``), so tests can check without a
GPU that the grid reaches every element the kernel is responsible for.

Kernel names: the float32 kernel has the base name, the float64 one ``<name>_f64``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .registry import OpError, numel

THREADS = 256                    # every kernel here runs 256-thread blocks
MAX_GRID_X = 2**31 - 1
MAX_GRID_YZ = 65535
STRIDE_BLOCKS = 8192             # grid-stride kernels: enough blocks to fill any current GPU


def IN(i: int) -> tuple[str, int]:
    return ("in", i)


def OUT(i: int) -> tuple[str, int]:
    return ("out", i)


def WS(i: int) -> tuple[str, int]:
    return ("workspace", i)


@dataclass(frozen=True)
class Coverage:
    """The grid's claim: along grid axis d it spans ``extents[d]`` items, ``per_block[d]`` per
    block (0: the kernel loops, grid-stride, so any grid covers them); the items index
    ``target``'s elements, ``elements_per_item`` each."""
    target: tuple[str, int]
    extents: tuple[int, ...]
    per_block: tuple[int, ...]
    elements_per_item: int = 1
    piece: bool = False     # one of several launches that each fill a disjoint part of target


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shmem: int
    args: tuple
    covers: Coverage


# ---------------------------------------------------------------------- scalars and names

def i32(v) -> np.int32:
    v = int(v)
    if not -2**31 <= v < 2**31:
        raise OpError(f"{v} does not fit the kernels' 32-bit index arithmetic")
    return np.int32(v)


def i64(v) -> np.int64:
    return np.int64(int(v))


def scalar(dtype, v):
    """``v`` as a numpy scalar of ``dtype`` (a float parameter of the kernel's type)."""
    return np.dtype(dtype).type(v)


def kernel_name(base: str, dtype) -> str:
    dt = np.dtype(dtype)
    if dt == np.float32:
        return base
    if dt == np.float64:
        return base + "_f64"
    raise OpError(f"no CUDA kernel for dtype {dt} (float32 and float64 have kernels)")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---------------------------------------------------------------------- common launch shapes

def grid_stride(kernel: str, n: int, args, target, per_thread: int = 4) -> Launch:
    """A 1-D grid-stride launch over ``n`` items of ``target``."""
    blocks = max(1, min(cdiv(n, THREADS * per_thread), STRIDE_BLOCKS))
    return Launch(kernel, (blocks, 1, 1), (THREADS, 1, 1), 0, tuple(args), Coverage(target, (n,), (0,)))


def copy_rows(dst, src, rows: int, row_elems: int, dst_ld: int, src_ld: int, dst_off: int, src_off: int,
              itemsize: int, piece: bool = False) -> Launch:
    """shape.cu's copy_rows, sizes given in elements: dst[dst_off + r*dst_ld + k] =
    src[src_off + r*src_ld + k] for r < rows, k < row_elems."""
    b = itemsize
    blocks_x = max(1, min(cdiv(row_elems * b, 16 * THREADS * 4), 4096))
    blocks_y = max(1, min(rows, MAX_GRID_YZ))
    args = (dst, src, i64(rows), i64(row_elems * b), i64(dst_ld * b), i64(src_ld * b), i64(dst_off * b),
            i64(src_off * b))
    return Launch("copy_rows", (blocks_x, blocks_y, 1), (THREADS, 1, 1), 0, args,
                  Coverage(dst, (row_elems, rows), (0, 0), 1, piece))


def per_block(kernel: str, items: int, args, target, elements_per_item: int = 1) -> Launch:
    """One block per item (the kernel loops over blocks when ``items`` passes the grid's limit)."""
    blocks = max(1, min(items, MAX_GRID_X))
    return Launch(kernel, (blocks, 1, 1), (THREADS, 1, 1), 0, tuple(args),
                  Coverage(target, (items,), (0 if items > blocks else 1,), elements_per_item))


@dataclass(frozen=True)
class GemmTiles:
    suffix: str          # "" (128x128) or "_s" (64x64)
    bm: int
    bn: int


LARGE, SMALL = GemmTiles("", 128, 128), GemmTiles("_s", 64, 64)
BK = 8
FULL_GPU_TILES = 256     # about two tiles per SM on a 132-SM H100


def per_row(base: str, dtype, shape, args) -> Launch:
    """One block per row of ``shape`` (its last axis is the row: normalizations, softmaxes),
    writing output 0; the kernel takes ``args``, then the row count and the row's length."""
    cols = shape[-1]
    rows = numel(shape) // cols
    return per_block(kernel_name(base, dtype), rows, (*args, i64(rows), i32(cols)), OUT(0), elements_per_item=cols)


def gemm_tiles(m: int, n: int, batch: int = 1) -> GemmTiles:
    """128x128 tiles when the product has enough of them to fill the GPU, else 64x64."""
    return LARGE if cdiv(m, LARGE.bm) * cdiv(n, LARGE.bn) * batch >= FULL_GPU_TILES else SMALL


def gemm_grid(tiles: GemmTiles, m: int, n: int, z: int) -> tuple[int, int, int]:
    grid = (cdiv(n, tiles.bn), cdiv(m, tiles.bm), z)
    if grid[0] > MAX_GRID_X or grid[1] > MAX_GRID_YZ or grid[2] > MAX_GRID_YZ:
        raise OpError(f"a {m}x{n} product in {z} slices exceeds the CUDA grid's limits")
    return grid


def split_k(tiles: GemmTiles, m: int, n: int, k: int, batch: int = 1) -> tuple[int, int]:
    """(splits, k_chunk) for a product with few output tiles and a long k: enough splits to
    give about FULL_GPU_TILES blocks, each split at least 2048 long, chunks a multiple of BK."""
    blocks = cdiv(m, tiles.bm) * cdiv(n, tiles.bn) * batch
    splits = max(1, min(cdiv(FULL_GPU_TILES, blocks), k // 2048, MAX_GRID_YZ // batch))
    chunk = cdiv(cdiv(k, splits), BK) * BK
    return cdiv(k, chunk), chunk


def gemm_launch(base: str, dtype, tiles: GemmTiles, m: int, n: int, z: int, args, target,
                piece: bool = False) -> Launch:
    """A tiled GEMM kernel (``base`` + tile suffix + dtype suffix): grid (n tiles, m tiles,
    z slices), each block one bm x bn tile of an m x n product (``piece``: of one part of
    ``target``, the other launches of the operator filling the rest)."""
    grid = gemm_grid(tiles, m, n, z)
    return Launch(kernel_name(base + tiles.suffix, dtype), grid, (THREADS, 1, 1), 0, tuple(args),
                  Coverage(target, (n, m, z), (tiles.bn, tiles.bm, 1), piece=piece))
