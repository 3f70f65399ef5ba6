"""The CUDA backend: the executor's primitives (interface.Device) on one NVIDIA GPU, through
cuda.bindings.driver alone. One cuMemAlloc is the arena, ``view`` returns typed windows of it
(``DeviceArray``), host buffers are pinned. Beside it: kernel binding and the driver's errors in
cuda_driver.py, capture in cuda_graph.py, the virtual-addressing arena in cuda_vmm.py; timing and the
sanitizer above every device, in instrument.py. Nothing CUDA is touched until ``detect_gpu`` has
found a device, and every driver call goes through ``_driver()`` (tests: fake_driver.py). Operator
scratch (``Op.cuda_workspaces``) is the arena's last ``scratch_bytes``: kernels run in order on the
compute stream, so they share it.
"""
from __future__ import annotations

import ctypes
import math

import numpy as np

from ..program import COMPUTE
from ..units import format_bytes
from . import cuda_graph, nvrtc
from .cuda_driver import (CudaError, CudaOutOfMemory, CudaUnavailable, DeviceArray, Kernels, Owned,  # noqa: F401
                          check, host_pointer)
from .cuda_vmm import ChunkCache, CudaVirtualMemoryError, VirtualArena  # noqa: F401 (re-exported)
from .detect import detect_gpu
from .instrument import Instrumented
from .pinned import DriverChunks, PinnedHostMemory

POISON = 0xFF


def _driver():
    """cuda.bindings.driver, imported only once detect_gpu has found a device."""
    from cuda.bindings import driver
    return driver


def CudaBackend(device: int = 0, graphs: bool = True, sanitize: bool = False, seed: int = 0,
                jitter_s: float | tuple[float, float, float] = 100e-6) -> Instrumented:
    """The cuda backend: a CudaDevice with timing and, with ``sanitize``, the sanitizer (a random
    delay of up to ``jitter_s`` before each instruction, for every stream or per stream)."""
    return Instrumented(CudaDevice(device, graphs), sanitize, seed, jitter_s)


class CudaDevice:
    name = "cuda"
    host_calls = False      # a data-parallel Program's all-reduce (cuLaunchHostFunc) is not wired yet
    timed_capture = False   # a CUDA graph holds no timing events: a timed iteration is issued eagerly

    def __init__(self, device: int = 0, graphs: bool = True):
        """``graphs``: capture each iteration as a CUDA graph (else every instruction is issued
        from Python every iteration)."""
        count, reason = detect_gpu()
        if count == 0:
            raise CudaUnavailable(f"no CUDA device: {reason}")
        if not 0 <= device < count:
            raise CudaUnavailable(f"no CUDA device {device}: {count} found")
        self._d = d = _driver()
        check(d, d.cuInit(0))
        self.device = check(d, d.cuDeviceGet(device))
        check(d, d.cuCtxSetCurrent(check(d, d.cuDevicePrimaryCtxRetain(self.device))))
        self.device_name = check(d, d.cuDeviceGetName(256, self.device)).split(b"\0")[0].decode()
        cc = [check(d, d.cuDeviceGetAttribute(getattr(d.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_{x}"),
                                              self.device)) for x in ("MAJOR", "MINOR")]
        self.arch = f"sm_{cc[0]}{cc[1]}"
        self.streams = self._new_streams()
        self.use_graphs = graphs
        self._pinned = PinnedHostMemory(DriverChunks(d))
        self.kernels = Kernels(d, nvrtc.compile_all(self.arch))     # cubins cached on disk
        self._prepared: dict = {}
        self._events: list = []          # free untimed events
        self._recorded: list = []        # untimed events recorded since the last synchronize
        self.dry = False           # capture's first pass: launches prepared, nothing issued
        self.generation = 0        # the arena's; a graph captured against an older one is refused
        self._arena, self._arena_bytes, self._scratch, self._scratch_bytes = 0, 0, 0, 0
        self._virtual: VirtualArena | None = None
        self._chunks: ChunkCache | None = None       # physical chunks, kept for the next virtual arena
        self._closed = False

    def _new_streams(self) -> list:
        d = self._d
        return [check(d, d.cuStreamCreate(d.CUstream_flags.CU_STREAM_NON_BLOCKING.value)) for _ in range(3)]

    # ------------------------------------------------------------------ memory
    def _replace_arena(self) -> None:
        self._sync_all()
        self._free_arena()
        self._prepared.clear()
        self.generation += 1

    def allocate_arena(self, nbytes: int, scratch_bytes: int = 0) -> None:
        """The arena: one cuMemAlloc of ``nbytes`` (synchronous and outside any pool, so it goes back
        to the device when freed), poisoned; its last ``scratch_bytes`` are operator scratch."""
        if not 0 <= scratch_bytes <= nbytes:
            raise ValueError(f"scratch of {scratch_bytes} bytes does not fit an arena of {nbytes}")
        self._replace_arena()
        d = self._d
        try:
            self._arena, self._arena_bytes = int(check(d, d.cuMemAlloc(max(int(nbytes), 1)))), int(nbytes)
        except CudaOutOfMemory:
            raise CudaOutOfMemory(f"an arena of {format_bytes(nbytes)} does not fit in the free memory of "
                                  f"{self.device_name}: plan for less (--memory), or free the GPU") from None
        self._scratch, self._scratch_bytes = self._arena + int(nbytes) - int(scratch_bytes), int(scratch_bytes)
        self._poison_now(self._arena, max(int(nbytes), 1))

    def allocate_virtual_arena(self, nbytes: int, scratch_bytes: int, mappings, virtual_bytes: int) -> None:
        """Page-table rows (virtual, physical, bytes) mapped once into ``virtual_bytes`` of reserved
        addresses (cuda_vmm.VirtualArena), poisoned; scratch beside it. ``view`` offsets are virtual."""
        if not 0 <= scratch_bytes <= nbytes:
            raise ValueError(f"scratch of {scratch_bytes} bytes does not fit an arena of {nbytes}")
        self._replace_arena()
        d = self._d
        self._chunks = self._chunks or ChunkCache(d, self.device)
        self._virtual = v = VirtualArena(d, self._chunks, mappings, virtual_bytes)
        for ptr, n in v.rows:
            self._poison_now(ptr, n)
        self._arena, self._arena_bytes = v.base, v.size
        if scratch_bytes:
            self._scratch = int(check(d, d.cuMemAlloc(int(scratch_bytes))))
            self._poison_now(self._scratch, int(scratch_bytes))
        self._scratch_bytes = int(scratch_bytes)

    def _poison_now(self, ptr: int, nbytes: int) -> None:
        check(self._d, self._d.cuMemsetD8Async(ptr, POISON, nbytes, self.streams[COMPUTE]))
        self.synchronize()

    def _free_arena(self) -> None:
        d = self._d
        if self._virtual is not None:
            self._virtual.unmap()
            self._virtual = None
            if self._scratch_bytes:
                check(d, d.cuMemFree(self._scratch))
        elif self._arena:
            check(d, d.cuMemFree(self._arena))
        self._arena, self._arena_bytes, self._scratch, self._scratch_bytes = 0, 0, 0, 0

    def view(self, offset: int, shape, dtype) -> DeviceArray:
        dtype, shape = np.dtype(dtype), tuple(int(n) for n in shape)
        end = int(offset) + math.prod(shape) * dtype.itemsize
        if not self._arena or offset < 0 or end > self._arena_bytes:
            raise ValueError(f"view [{offset}, {end}) lies outside the arena of {self._arena_bytes} bytes")
        return DeviceArray(self._arena + int(offset), shape, dtype)

    def host_buffer(self, shape, dtype) -> np.ndarray:
        """A numpy array in pinned (page-locked) host memory, filled with 0xFF bytes."""
        return self._pinned.array(shape, dtype, POISON)

    def read(self, view: DeviceArray) -> np.ndarray:
        """A host copy of ``view`` once every stream is idle."""
        self._sync_all()
        out = np.empty(view.shape, view.dtype)
        if view.nbytes:
            check(self._d, self._d.cuMemcpyDtoH(out.ctypes.data, view.ptr, view.nbytes))
        return out

    def write(self, view: DeviceArray, value) -> None:
        a = np.ascontiguousarray(value, dtype=view.dtype)
        if a.size != view.size:
            raise ValueError(f"cannot write {a.size} elements into a view of {view.size}")
        self._sync_all()
        if view.nbytes:     # async on our stream: a pageable cuMemcpyHtoD may return before the bytes land
            check(self._d, self._d.cuMemcpyHtoDAsync(view.ptr, a.ctypes.data, view.nbytes, self.streams[COMPUTE]))
            self._sync_all()

    def launch(self, stream: int, node, inputs, outputs) -> None:
        """Run ``node``'s kernels on ``stream``; prepared launches are kept by node and addresses."""
        key = (stream, node.op, node.id, tuple((a.ptr, a.shape, a.dtype) for a in inputs),
               tuple((a.ptr, a.shape, a.dtype) for a in outputs))
        prepared = self._prepared.get(key)
        if prepared is None:
            prepared = self._prepared[key] = self.kernels.bind(stream, node, inputs, outputs, self._scratch,
                                                               self._scratch_bytes)
        if not self.dry:
            for f, grid, block, shmem, params in prepared:
                check(self._d, self._d.cuLaunchKernel(f, *grid, *block, shmem, self.streams[stream], params, 0))

    def delay(self, stream: int, seconds: float) -> None:
        """Hold ``stream`` back for ``seconds`` (the sanitizer's spinning kernel, engine/backends/sanitizer.cu)."""
        if self.kernels.cubins.get("sanitizer_delay") is None:
            self.kernels.cubins["sanitizer_delay"] = nvrtc.compile_sanitizer(self.arch)
        f = self.kernels.function("sanitizer_delay")
        check(self._d, self._d.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, self.streams[stream],
                                              ((int(seconds * 1e9),), (ctypes.c_ulonglong,)), 0))

    # ------------------------------------------------------------------ copies and events
    def copy_h2d(self, stream: int, dst: DeviceArray, src: np.ndarray) -> None:
        src_ptr = host_pointer(self._pinned, dst, src)
        if dst.nbytes and not self.dry:
            check(self._d, self._d.cuMemcpyHtoDAsync(dst.ptr, src_ptr, dst.nbytes, self.streams[stream]))

    def copy_d2h(self, stream: int, dst: np.ndarray, src: DeviceArray) -> None:
        dst_ptr = host_pointer(self._pinned, src, dst)
        if src.nbytes and not self.dry:
            check(self._d, self._d.cuMemcpyDtoHAsync(dst_ptr, src.ptr, src.nbytes, self.streams[stream]))

    def fill(self, stream: int, view: DeviceArray, byte: int) -> None:
        if view.nbytes and not self.dry:
            check(self._d, self._d.cuMemsetD8Async(view.ptr, byte, view.nbytes, self.streams[stream]))

    def host_call(self, stream: int, fn) -> None:
        raise CudaUnavailable("the cuda backend cannot run a data-parallel Program's all-reduce yet; run the ranks "
                              "on the cpu backend")

    def record(self, stream: int, timed: bool = False):
        """An event recorded on ``stream``. Untimed ones come from a pool: every event recorded since
        the last ``synchronize`` is complete after it, and may be recorded again."""
        if self.dry:
            return None
        d = self._d
        if timed:
            ev = Owned(check(d, d.cuEventCreate(0)), d.cuEventDestroy)
            check(d, d.cuEventRecord(ev.handle, self.streams[stream]))
            return ev
        ev = self._events.pop() if self._events else check(d, d.cuEventCreate(
            d.CUevent_flags.CU_EVENT_DISABLE_TIMING.value))
        check(d, d.cuEventRecord(ev, self.streams[stream]))
        self._recorded.append(ev)
        return ev

    def wait(self, stream: int, ev) -> None:
        if not self.dry:
            check(self._d, self._d.cuStreamWaitEvent(self.streams[stream], ev, 0))

    def elapsed(self, start, end) -> float:
        """Seconds between two timed events, both complete."""
        return check(self._d, self._d.cuEventElapsedTime(start.handle, end.handle)) / 1e3

    # ------------------------------------------------------------------ graphs, sync, teardown
    def capture(self, issue):
        """What ``issue()`` submits as a CUDA graph (cuda_graph.capture), or None with graphs off."""
        return cuda_graph.capture(self, issue) if self.use_graphs else None

    def replay(self, graph) -> None:
        cuda_graph.replay(self, graph)

    def _sync_all(self) -> None:
        for s in self.streams:
            check(self._d, self._d.cuStreamSynchronize(s))

    def synchronize(self) -> None:
        """Wait for every stream (an error in their work surfaces here); recorded events go back to the pool."""
        self._sync_all()
        self._events.extend(self._recorded)
        self._recorded.clear()

    def close(self) -> None:
        """Free the arena, events and streams. Host buffers stay valid while numpy arrays use them."""
        if self._closed:
            return
        self._closed = True
        try:
            self.synchronize()
        finally:
            self._prepared.clear()
            self._free_arena()
            if self._chunks is not None:
                self._chunks.release()
            d = self._d
            for ev in self._events + self._recorded:
                d.cuEventDestroy(ev)
            for s in self.streams:
                d.cuStreamDestroy(s)
            self._pinned.forget()
