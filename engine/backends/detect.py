"""GPU detection, done once and before any CUDA object is made.

Without libcuda, the first driver call raises a RuntimeError, and creating
cuda.core objects afterwards has been seen to hang; so nothing else may touch
CUDA until this says a device exists. A device counts only when the installed
cuda.core is the major version the kernels' compiler (nvrtc.py) is written for; the
backend itself calls cuda.bindings.driver.
"""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def detect_gpu() -> tuple[int, str]:
    """(number of usable CUDA devices, a short reason when there are none)."""
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
    problem = cuda_core_problem()
    if problem:
        return 0, problem
    return int(count), ""


SUPPORTED_CUDA_CORE_MAJOR = 1


def cuda_core_problem() -> str:
    """Why the installed cuda.core cannot compile the backend's kernels ('' when it can): nvrtc.py
    is written against cuda.core 1.x; 0.x kept its API in ``cuda.core.experimental``."""
    from importlib import metadata
    try:
        version = metadata.version("cuda-core")
    except metadata.PackageNotFoundError:
        try:
            import cuda.core
        except ImportError as e:
            return f"cuda.core is not importable ({e})"
        version = str(getattr(cuda.core, "__version__", "0"))
    major = version.split(".")[0]
    if not major.isdigit() or int(major) != SUPPORTED_CUDA_CORE_MAJOR:
        return (f"cuda.core {version} is installed, and the cuda backend needs cuda.core "
                f"{SUPPORTED_CUDA_CORE_MAJOR}.x (pip install 'cuda-python>=13,<14')")
    return ""
