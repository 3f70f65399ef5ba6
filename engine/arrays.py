"""Host arrays laid out as the memory pool lays out its objects. A leaf module (numpy only),
so backends and the reference interpreter share it without importing each other."""
from __future__ import annotations

import numpy as np

ALIGNMENT = 64


def aligned_empty(shape, dtype, alignment: int = ALIGNMENT) -> np.ndarray:
    """An uninitialized array whose data starts on an ``alignment``-byte boundary, as pool
    objects do, so that vectorized kernels take the same code path everywhere."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(n + alignment, dtype=np.uint8)
    start = (-raw.ctypes.data) % alignment
    return raw[start:start + n].view(dtype).reshape(shape)
