"""GPU detection, done once and before any CUDA object is made.

Without libcuda, the first driver call raises a RuntimeError, and creating
cuda.core objects afterwards has been seen to hang; so nothing else may touch
CUDA until this says a device exists.
"""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def detect_gpu() -> tuple[int, str]:
    """(number of CUDA devices, a short reason when there are none)."""
    try:
        from cuda.bindings import driver
    except ImportError as e:
        return 0, f"cuda-python is not importable ({e})"
    try:
        (err,) = driver.cuInit(0)
    except RuntimeError:
        return 0, "libcuda not loadable"
    if err != driver.CUresult.CUDA_SUCCESS:
        return 0, f"cuInit failed ({err.name})"
    err, count = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS or count == 0:
        return 0, "no CUDA device"
    return int(count), ""
