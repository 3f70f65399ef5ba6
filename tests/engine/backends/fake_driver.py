"""A stand-in for cuda.bindings.driver, in host memory: the one module the CUDA backend runs on
(engine/backends/cuda.py's ``_driver``), replaced whole, to test the backend's own logic on a
machine without a GPU. "Device" memory is host memory, every stream runs its work at once,
kernels are logged (and, with ``emulate``, run on the host: tests/ops/cuda_emulator.py), events
read a fake clock (milliseconds; copies move it at 1 GB/s after 5 us, events by 1 us), and while a
stream captures, its work is recorded and replayed by cuGraphLaunch. Calls return (CUresult, ...)
tuples as the real bindings do, and refuse what the driver refuses: a synchronous call while a
stream captures, a kernel parameter type the bindings cannot marshal, timing from an event made
without timing. Whether the real driver behaves so, only the ``gpu`` tests say.
"""
from __future__ import annotations

import ctypes
import itertools
import mmap
import os
from types import SimpleNamespace

import numpy as np

OK, BAD, OOM = 0, 1, 2       # the driver's CUresult values
_SCALARS = {ctypes.c_int: np.int32, ctypes.c_uint: np.uint32, ctypes.c_longlong: np.int64, ctypes.c_ulonglong: np.uint64,
            ctypes.c_float: np.float32, ctypes.c_double: np.float64}


class AnyKernel(dict):
    """Stands for compile_all's result: every kernel name has a (fake) cubin."""

    def get(self, name, default=None):
        return b"cubin"


def install(monkeypatch, emulate: bool = False) -> "FakeDriver":
    """Make engine.backends.cuda find one device and run on a fresh fake driver; return it."""
    from engine.backends import cuda as cuda_backend
    fake = FakeDriver(emulate)
    monkeypatch.setattr(cuda_backend, "detect_gpu", lambda: (1, ""))
    monkeypatch.setattr(cuda_backend, "_driver", lambda: fake)
    monkeypatch.setattr(cuda_backend.nvrtc, "compile_all", lambda arch: AnyKernel())
    monkeypatch.setattr(cuda_backend.nvrtc, "compile_sanitizer", lambda arch: b"cubin")
    return fake


def install_detected(monkeypatch, emulate: bool = False) -> "FakeDriver":
    """``install``, and make ``engine.backends.detect.detect_gpu`` report the fake device too."""
    from engine.backends import detect
    fake = install(monkeypatch, emulate)
    monkeypatch.setattr(detect, "detect_gpu", lambda: (1, ""))
    return fake


def _enum(**members):
    return SimpleNamespace(**{k: SimpleNamespace(value=v, name=k) for k, v in members.items()})


class FakeDriver:
    CUresult = SimpleNamespace(CUDA_SUCCESS=OK)
    CUdevice_attribute = _enum(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR=75,
                               CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR=76)
    CUstream_flags = _enum(CU_STREAM_NON_BLOCKING=1)
    CUevent_flags = _enum(CU_EVENT_DISABLE_TIMING=2)
    CUstreamCaptureMode = _enum(CU_STREAM_CAPTURE_MODE_RELAXED=2)
    CUfunction_attribute = _enum(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES=8)

    def __init__(self, emulate: bool = False):
        self.emulate = emulate
        self.memory: dict[int, np.ndarray] = {}        # pointer -> backing array
        self.launches: list = []                         # (kernel name, grid, block, args) as run
        self.memsets: list = []                          # (pointer, bytes) of each cuMemsetD8Async issued
        self.now = 0.0                                   # the fake device clock, ms
        self.capture: list | None = None                 # work recorded while the compute stream captures
        self.fail_capture = False
        self.device_bytes = 1 << 40                      # what cuMemAlloc grants at most
        self.vmm = FakeVirtualMemory()
        self._ids = itertools.count(0x1000)

    def __getattr__(self, name):                         # the virtual-memory calls
        return getattr(self.vmm, name)

    def run(self, fn) -> tuple:
        """Run stream work now, or record it while a graph is being captured."""
        if self.capture is not None:
            self.capture.append(fn)
        else:
            fn()
        return (OK,)

    def _sync_call(self) -> tuple:
        return (BAD,) if self.capture is not None else (OK,)

    # ------------------------------------------------------------------ calls that only answer
    def cuInit(self, flags): return (OK,)
    def cuGetErrorName(self, err): return (OK, {BAD: b"CUDA_ERROR_INVALID_VALUE", OOM: b"CUDA_ERROR_OUT_OF_MEMORY"}[err])
    def cuDeviceGet(self, ordinal): return (OK, ordinal)
    def cuDevicePrimaryCtxRetain(self, dev): return (OK, next(self._ids))
    def cuCtxSetCurrent(self, ctx): return (OK,)
    def cuDeviceGetName(self, length, dev): return (OK, b"Fake GPU".ljust(length, b"\0"))
    def cuDeviceGetAttribute(self, attr, dev): return (OK, {75: 9, 76: 0}[attr.value])
    def cuStreamCreate(self, flags): return (OK, next(self._ids))
    def cuStreamDestroy(self, stream): return (OK,)
    def cuStreamWaitEvent(self, stream, ev, flags): return (OK,)
    def cuEventDestroy(self, ev): return (OK,)
    def cuModuleLoadData(self, image): return (OK, SimpleNamespace(image=image))
    def cuModuleGetFunction(self, module, name): return (OK, SimpleNamespace(name=name.decode()))
    def cuFuncSetAttribute(self, f, attr, value): return (OK,)
    def cuGraphInstantiate(self, graph, flags): return (OK, list(graph))
    def cuGraphDestroy(self, graph): return (OK,)

    # ------------------------------------------------------------------ memory
    def _alloc(self, n: int) -> int:
        a = np.empty(max(int(n), 1) + 256, np.uint8)
        ptr = a.ctypes.data + (-a.ctypes.data) % 256
        self.memory[ptr] = a
        return ptr

    def _free(self, ptr):
        return (OK,) if self.memory.pop(int(ptr), None) is not None else (BAD,)

    def cuMemAlloc(self, n): return (OK, self._alloc(n)) if n <= self.device_bytes else (OOM, None)
    def cuMemAllocHost(self, n): return (OK, self._alloc(n))
    cuMemFree = cuMemFreeHost = _free

    def cuMemsetD8Async(self, dst, value, n, stream):
        self.memsets.append((int(dst), int(n)))
        return self.run(lambda: ctypes.memset(dst, value, n))

    def _copy_async(self, dst, src, n, stream):
        def copy():
            ctypes.memmove(dst, src, n)
            self.now += 0.005 + n / 1e6                  # 5 us + 1 GB/s
        return self.run(copy)

    cuMemcpyHtoDAsync = cuMemcpyDtoHAsync = _copy_async

    def cuMemcpyDtoH(self, dst, src, n):
        ctypes.memmove(dst, src, n)
        return self._sync_call()

    # ------------------------------------------------------------------ streams and events
    def cuStreamSynchronize(self, stream): return self._sync_call()
    def cuEventCreate(self, flags): return (OK, SimpleNamespace(timing=not flags & 2, t=None))

    def cuEventRecord(self, ev, stream):
        def tick():
            self.now += 0.001
            ev.t = self.now
        return self.run(tick)

    def cuEventElapsedTime(self, start, end):
        if not (start.timing and end.timing) or start.t is None or end.t is None:
            return (BAD, None)
        return (OK, float(end.t - start.t))

    # ------------------------------------------------------------------ kernels and graphs
    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        values, types = params          # the bindings' (values, ctypes types) form
        args = []
        for v, t in zip(values, types, strict=True):
            if t is ctypes.c_void_p:
                assert isinstance(v, int) and not isinstance(v, bool), (f.name, v)
                args.append(v)
            else:
                args.append(_SCALARS[t](v))       # KeyError: a type the bindings cannot marshal
        grid, block = (gx, gy, gz), (bx, by, bz)
        self.run(lambda: self.launches.append((f.name, grid, block, tuple(args))))
        if f.name == "sanitizer_delay":        # the sanitizer's spin: only time passes
            self.run(lambda: setattr(self, "now", self.now + int(args[0]) / 1e6))
        elif self.emulate:
            from tests.ops import cuda_emulator
            self.run(lambda: cuda_emulator.launch(f.name, grid, block, args))
        return (OK,)

    def cuStreamBeginCapture(self, stream, mode):
        self.capture = []
        return (OK,)

    def cuStreamEndCapture(self, stream):
        work, self.capture = self.capture, None
        if self.fail_capture or work is None:
            return (BAD, None)
        return (OK, work)

    def cuGraphLaunch(self, graph_exec, stream):
        for fn in graph_exec:
            self.run(fn)
        return (OK,)


class FakeVirtualMemory:
    """The driver's virtual memory management, on the host's own: a chunk handle is a memory
    file (os.memfd_create), cuMemAddressReserve reserves with mmap(PROT_NONE), cuMemMap maps the
    file there with MAP_FIXED, so bytes written through one virtual address land in the chunk and
    show through every other mapping of it. Checks what the driver documents: sizes and addresses
    multiples of the granularity, a map only inside a reservation and only over unmapped bytes,
    access set only on mapped bytes, unmap of exactly a mapped range, a reservation freed only once
    nothing in it is mapped."""
    CUmemAllocationType = SimpleNamespace(CU_MEM_ALLOCATION_TYPE_PINNED="pinned")
    CUmemLocationType = SimpleNamespace(CU_MEM_LOCATION_TYPE_DEVICE="device")
    CUmemAllocationGranularity_flags = SimpleNamespace(CU_MEM_ALLOC_GRANULARITY_MINIMUM="minimum")
    CUmemAccess_flags = SimpleNamespace(CU_MEM_ACCESS_FLAGS_PROT_READWRITE="rw")

    def __init__(self, granularity: int = 2 << 20):
        from engine.backends.host_virtual import _libc
        self.libc, self.granularity = _libc(), granularity
        self.handles: dict[int, tuple[int, int]] = {}      # handle -> (memory file, bytes)
        self.reserved: dict[int, int] = {}                  # base -> bytes
        self.mapped: dict[int, tuple[int, int]] = {}        # address -> (bytes, handle)
        self.created = self.released = 0
        self._ids = itertools.count(0x5000)

    def chunk(self, handle: int) -> np.ndarray:
        """A handle's bytes, read through its memory file (not through any mapping)."""
        fd, size = self.handles[handle]
        return np.frombuffer(os.pread(fd, size, 0), np.uint8)

    def _granular(self, *ns) -> bool:
        return all(int(n) % self.granularity == 0 for n in ns)

    def _overlaps_mapping(self, ptr, size) -> bool:
        return any(a < ptr + size and ptr < a + n for a, (n, _) in self.mapped.items())

    def CUmemAllocationProp(self):
        return SimpleNamespace(type=None, location=SimpleNamespace(type=None, id=None))

    CUmemAccessDesc = CUmemAllocationProp

    def cuMemGetAllocationGranularity(self, prop, flag): return (OK, self.granularity)

    def cuMemCreate(self, size, prop, flags):
        if not self._granular(size) or size <= 0 or prop.type != "pinned" or prop.location.type != "device":
            return (BAD, None)
        fd = os.memfd_create("fake-cuda-chunk")
        os.ftruncate(fd, int(size))
        handle = next(self._ids)
        self.handles[handle] = (fd, int(size))
        self.created += 1
        return (OK, handle)

    def cuMemRelease(self, handle):
        entry = self.handles.pop(handle, None)
        if entry is None:
            return (BAD,)
        os.close(entry[0])
        self.released += 1
        return (OK,)

    def cuMemAddressReserve(self, size, alignment, addr, flags):
        if not self._granular(size):
            return (BAD, 0)
        size, align = int(size), max(int(alignment), self.granularity)
        raw = self.libc.mmap(None, size + align, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        ptr = -(-raw // align) * align                 # aligned as asked: trim the ends
        if ptr > raw:
            self.libc.munmap(raw, ptr - raw)
        self.libc.munmap(ptr + size, raw + align - ptr)
        self.reserved[ptr] = size
        return (OK, ptr)

    def cuMemAddressFree(self, ptr, size):
        if self.reserved.get(ptr) != size or self._overlaps_mapping(ptr, size):
            return (BAD,)
        del self.reserved[ptr]
        self.libc.munmap(ptr, size)
        return (OK,)

    def cuMemMap(self, ptr, size, offset, handle, flags):
        entry = self.handles.get(handle)
        inside = any(b <= ptr and ptr + size <= b + n for b, n in self.reserved.items())
        if (entry is None or not self._granular(ptr, size, offset) or offset + size > entry[1] or not inside
                or self._overlaps_mapping(ptr, size)):
            return (BAD,)
        got = self.libc.mmap(ptr, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | 0x10, entry[0], offset)
        assert got == ptr
        self.mapped[ptr] = (int(size), handle)
        return (OK,)

    def cuMemUnmap(self, ptr, size):
        if self.mapped.get(ptr, (None,))[0] != size:
            return (BAD,)
        del self.mapped[ptr]
        got = self.libc.mmap(ptr, size, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x10, -1, 0)
        assert got == ptr
        return (OK,)

    def cuMemSetAccess(self, ptr, size, descs, count):
        covered = sum(n for a, (n, _) in self.mapped.items() if ptr <= a and a + n <= ptr + size)
        if covered != size or count != len(descs) or any(d.flags != "rw" or d.location.type != "device"
                                                           for d in descs):
            return (BAD,)
        return (OK,)
