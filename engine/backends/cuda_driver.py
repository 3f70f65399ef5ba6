"""The driver as the CUDA backend uses it: its errors (``check``), device windows, timed events,
and kernels: modules loaded from NVRTC's cubins and an operator's launches (``Op.cuda_launches``)
bound to its tensors' addresses as cuLaunchKernel's arguments: (function, grid, block, dynamic
shared memory, (values, ctypes types)).
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

import numpy as np

from ops import registry as op_registry
from ops.workspace import workspace_bytes, workspace_offsets

from ..errors import EngineError
from ..program import COMPUTE

_CTYPES = {np.dtype(np.int32): ctypes.c_int, np.dtype(np.uint32): ctypes.c_uint, np.dtype(np.int64): ctypes.c_longlong,
           np.dtype(np.uint64): ctypes.c_ulonglong, np.dtype(np.float32): ctypes.c_float,
           np.dtype(np.float64): ctypes.c_double}
BIG_SHARED = 48 * 1024      # dynamic shared memory above this must be opted into per function


class CudaUnavailable(EngineError, RuntimeError):
    """No usable CUDA device (the reason comes from detect_gpu)."""


class CudaError(RuntimeError):
    """A CUDA driver call failed."""


class CudaOutOfMemory(EngineError, CudaError):
    """The device has too little free memory for an allocation: a user-facing error, one line."""


def check(d, result):
    """The values a driver call returned after its CUresult; CudaError naming the failure
    (CudaOutOfMemory for CUDA_ERROR_OUT_OF_MEMORY)."""
    if result[0] != d.CUresult.CUDA_SUCCESS:
        _, name = d.cuGetErrorName(result[0])
        name = name.decode() if isinstance(name, bytes) else str(name)
        raise (CudaOutOfMemory if name == "CUDA_ERROR_OUT_OF_MEMORY" else CudaError)(f"CUDA driver call failed: {name}")
    return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)


class Owned:
    """A driver handle released (``release(handle)``) when the last reference to it goes: pinned
    host memory that numpy arrays still use, an event with timing (the pool keeps only untimed ones)."""

    def __init__(self, handle, release):
        self.handle, self._release = handle, release

    def __del__(self):
        try:
            self._release(self.handle)
        except Exception:      # the driver may be gone at interpreter exit
            pass


@dataclass(frozen=True)
class DeviceArray:
    """A typed window of device memory: what ``view`` returns and kernels and copies take."""
    ptr: int
    shape: tuple
    dtype: np.dtype

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __getitem__(self, key):
        """1-D slices with step 1 (as measure_link takes ``dev[:n]``)."""
        if len(self.shape) != 1 or not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("a DeviceArray takes only 1-D slices with step 1")
        start, stop, _ = key.indices(self.shape[0])
        return DeviceArray(self.ptr + start * self.dtype.itemsize, (max(start, stop) - start,), self.dtype)


def host_pointer(pinned, dev: DeviceArray, host: np.ndarray) -> int:
    """The address of ``host`` for an asynchronous copy to or from ``dev``: same size, contiguous, and
    pinned (the driver copies pageable memory synchronously, which would serialize the streams)."""
    if not isinstance(dev, DeviceArray) or not isinstance(host, np.ndarray):
        raise TypeError("copies go between a DeviceArray and a numpy array from host_buffer")
    if dev.nbytes != host.nbytes or not host.flags.c_contiguous:
        raise ValueError(f"copy of {host.nbytes} contiguous host bytes to/from {dev.nbytes} device bytes")
    if host.nbytes and not pinned.contains(host.ctypes.data, host.nbytes):
        raise ValueError("asynchronous copies need host memory from CudaBackend.host_buffer (pinned)")
    return host.ctypes.data


class Kernels:
    """Functions by name, each cubin loaded once (cuModuleLoadData) when first needed."""

    def __init__(self, d, cubins: dict):
        self._d, self.cubins = d, cubins
        self._modules: dict[int, object] = {}
        self._functions: dict[str, object] = {}

    def function(self, name: str):
        f = self._functions.get(name)
        if f is None:
            cubin = self.cubins.get(name)
            if cubin is None:
                raise CudaError(f"no compiled CUDA kernel named '{name}'")
            module = self._modules.get(id(cubin))
            if module is None:
                module = self._modules[id(cubin)] = check(self._d, self._d.cuModuleLoadData(cubin))
            f = self._functions[name] = check(self._d, self._d.cuModuleGetFunction(module, name.encode()))
        return f

    def bind(self, stream: int, node, inputs, outputs, scratch: int, scratch_bytes: int) -> list:
        """[(function, grid, block, shmem, (values, types))] for one node, its tensors at these
        addresses and its operator scratch (if any) at ``scratch``."""
        decl = op_registry.get(node.op)
        sizes = tuple(decl.cuda_workspaces(node.attrs, inputs, outputs))
        need = workspace_bytes(sizes)
        if need and stream != COMPUTE:
            raise CudaError(f"'{node.op}' needs scratch, which only kernels on the compute stream may use")
        if need > scratch_bytes:
            raise CudaError(f"'{node.op}' (node {node.id}) needs {need} bytes of operator scratch but the arena "
                            f"reserves {scratch_bytes}: the Program was planned for another graph; plan it for "
                            "this one (its Arena.scratch_bytes is planner.facts.GraphFacts.scratch)")
        offsets = workspace_offsets(sizes)
        refs = {"in": lambda i: inputs[i].ptr, "out": lambda i: outputs[i].ptr,
                "workspace": lambda i: scratch + offsets[i]}
        bound = []
        for l in decl.cuda_launches(node.attrs, inputs, outputs):
            values, types = [], []
            for a in l.args:
                if isinstance(a, tuple):
                    values.append(refs[a[0]](a[1]))
                    types.append(ctypes.c_void_p)
                elif isinstance(a, np.generic) and a.dtype in _CTYPES:
                    values.append(a.item())
                    types.append(_CTYPES[a.dtype])
                else:
                    raise TypeError(f"{node.op}: kernel {l.kernel} argument {a!r} is not a numpy scalar")
            f = self.function(l.kernel)
            if l.shmem > BIG_SHARED:
                attr = self._d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                check(self._d, self._d.cuFuncSetAttribute(f, attr, l.shmem))
            bound.append((f, l.grid, l.block, l.shmem, (tuple(values), tuple(types))))
        return bound
