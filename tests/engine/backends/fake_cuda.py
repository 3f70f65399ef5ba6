"""A stand-in for cuda.core and cuda.bindings.driver, in host memory, to test the CUDA
backend's own logic (memory, copies, argument binding, timing, capture plumbing) on a
machine without a GPU. It models only what the backend calls, the way the real APIs are
documented to behave: "device" memory is host memory, every stream runs its work at once,
kernels are logged (and, with ``emulate``, run on the host), events read a fake clock (milliseconds; copies move
it at 1 GB/s after 5 us, events by 1 us), and while a
graph is being built the copies and launches of the capturing streams are recorded and
replayed by Graph.launch. It cannot say whether the real CUDA calls work: the ``gpu``
tests do that."""
from __future__ import annotations

import ctypes
import itertools
from types import SimpleNamespace

import numpy as np


class AnyKernel(dict):
    """Stands for compile_all's result: every kernel name has a (fake) cubin."""

    def get(self, name, default=None):
        return b"cubin"


def install(monkeypatch, emulate: bool = False) -> "Api":
    """Make engine.backends.cuda find one device and use a fresh fake CUDA; return the fake.
    ``emulate``: kernels really run, on the host (tests/ops/cuda_emulator.py)."""
    from engine.backends import cuda as cuda_backend
    api = Api(emulate)
    monkeypatch.setattr(cuda_backend, "detect_gpu", lambda: (1, ""))
    monkeypatch.setattr(cuda_backend, "_cuda_api", lambda: (api.driver, api.core))
    monkeypatch.setattr(cuda_backend.nvrtc, "compile_all", lambda arch: AnyKernel())
    monkeypatch.setattr(cuda_backend.nvrtc, "compile_sanitizer", lambda arch: b"cubin")
    return api


def install_detected(monkeypatch, emulate: bool = False) -> Api:
    """``install``, and make ``engine.backends.detect.detect_gpu`` report the fake device too,
    for callers that ask detection first (``python -m engine.train --backend auto|cuda``)."""
    from engine.backends import detect
    api = install(monkeypatch, emulate)
    monkeypatch.setattr(detect, "detect_gpu", lambda: (1, ""))
    return api


class Api:
    """One fake CUDA: ``driver`` and ``core`` namespaces sharing memory, logs and a clock."""

    def __init__(self, emulate: bool = False):
        self.emulate = emulate
        self.memory: dict[int, np.ndarray] = {}          # pointer -> backing array
        self.launches: list = []                           # (kernel name, grid, block, args) as run
        self.memsets: list = []                            # (pointer, bytes) of each cuMemsetD8Async issued
        self.now = 0.0                                     # the fake device clock, ms
        self.capture: list | None = None                   # work recorded while a graph is built
        self.fail_capture = False
        self.vmm = FakeVirtualMemory()
        self.driver = self._driver()
        self.core = self._core()

    # ------------------------------------------------------------------ memory
    def _alloc(self, n: int) -> int:
        a = np.empty(max(n, 1) + 256, np.uint8)
        ptr = a.ctypes.data + (-a.ctypes.data) % 256
        self.memory[ptr] = a
        return ptr

    def run(self, fn) -> None:
        """Run stream work now, or record it while a graph is being built."""
        if self.capture is not None:
            self.capture.append(fn)
        else:
            fn()

    def _driver(self):
        api = self
        ok = 0

        def memcpy_async(dst, src, n, stream):
            def copy():
                ctypes.memmove(dst, src, n)
                api.now += 0.005 + n / 1e6                 # 5 us + 1 GB/s
            api.run(copy)
            return (ok,)

        def memset(dst, value, n, stream):
            api.memsets.append((int(dst), int(n)))
            api.run(lambda: ctypes.memset(dst, value, n))
            return (ok,)

        def free(ptr):
            return (ok,) if api.memory.pop(int(ptr), None) is not None else (1,)

        return SimpleNamespace(
            CUresult=SimpleNamespace(CUDA_SUCCESS=ok),
            CUfunction_attribute=SimpleNamespace(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES=8),
            cuGetErrorName=lambda err: (ok, b"CUDA_ERROR_INVALID_VALUE"),
            cuMemAlloc=lambda n: (ok, api._alloc(int(n))),
            cuMemFree=free,
            cuMemsetD8Async=memset,
            cuMemcpyHtoDAsync=memcpy_async,
            cuMemcpyDtoHAsync=memcpy_async,
            cuMemcpyHtoD=lambda dst, src, n: (ctypes.memmove(dst, src, n), (ok,))[1],
            cuMemcpyDtoH=lambda dst, src, n: (ctypes.memmove(dst, src, n), (ok,))[1],
            cuKernelSetAttribute=lambda *a: (ok,),
            **self.vmm.driver_calls(),
        )

    # ------------------------------------------------------------------ cuda.core
    def _core(self):
        api = self

        class Event:
            def __init__(self, timing):
                self.timing, self.t = timing, None

            def __sub__(self, other):
                assert self.timing and other.timing and self.t is not None and other.t is not None
                return float(self.t - other.t)

            def sync(self):
                pass

        class Stream:
            def __init__(self, i):
                self.handle = 0x1000 + i

            def record(self, event=None, options=None):
                ev = Event(bool(options and options.timing_enabled))

                def tick():
                    api.now += 0.001
                    ev.t = api.now
                api.run(tick)
                return ev

            def wait(self, event_or_stream):
                pass

            def sync(self):
                pass

            def create_graph_builder(self):
                return Builder()

        class Graph:
            def __init__(self, work):
                self.work = work

            def launch(self, stream):
                for fn in self.work:
                    fn()

        class Builder:
            def begin_building(self, mode="relaxed"):
                api.capture = []
                return self

            def end_building(self):
                if api.fail_capture:
                    raise RuntimeError("CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
                self.work, api.capture = api.capture, None
                return self

            def complete(self):
                return Graph(self.work)

            def close(self):
                api.capture = None

        class Device:
            def __init__(self, device_id=0):
                self.device_id, self.arch, self.name = device_id, "90", "Fake GPU"
                self.streams = itertools.count()

            def set_current(self):
                pass

            def create_stream(self):
                return Stream(next(self.streams))

        class Buffer:
            def __init__(self, size):
                self.handle, self.size = api._alloc(size), size

        class PinnedResource:
            def allocate(self, size, *, stream=None):
                return Buffer(size)

        class Kernel:
            def __init__(self, name):
                self.name, self.handle = name, hash(name)
                self.attributes = SimpleNamespace(num_regs=32)

        class Module:
            def get_kernel(self, name):
                return Kernel(name)

        def launch(stream, config, kernel, *args):
            for a in args:        # the real launcher's rule: Python ints are pointers, floats doubles
                assert isinstance(a, np.generic) or (isinstance(a, int) and not isinstance(a, bool)), a
            api.run(lambda: api.launches.append((kernel.name, config.grid, config.block, args)))
            if kernel.name == "sanitizer_delay":          # the sanitizer's spin: only time passes
                api.run(lambda: setattr(api, "now", api.now + int(args[0]) / 1e6))
            elif api.emulate:
                from tests.ops import cuda_emulator
                api.run(lambda: cuda_emulator.launch(kernel.name, config.grid, config.block, args))

        return SimpleNamespace(
            Device=Device, EventOptions=lambda timing_enabled=False: SimpleNamespace(timing_enabled=timing_enabled),
            LaunchConfig=lambda grid, block, shmem_size=0: SimpleNamespace(grid=grid, block=block, shmem=shmem_size),
            LegacyPinnedMemoryResource=PinnedResource, ObjectCode=SimpleNamespace(from_cubin=lambda b: Module()),
            launch=launch)


class FakeVirtualMemory:
    """The driver's virtual memory management, on the host's own: a chunk handle is a memory
    file (os.memfd_create), cuMemAddressReserve reserves with mmap(PROT_NONE), cuMemMap maps the
    file there with MAP_FIXED, so bytes written through one virtual address really land in the
    chunk and show through every other mapping of it. Checks what the driver documents: sizes
    and addresses multiples of the granularity, a map only inside a reservation and only over
    unmapped bytes, access set only on mapped bytes, unmap of exactly a mapped range, a
    reservation freed only once nothing in it is mapped."""

    def __init__(self, granularity: int = 2 << 20):
        from engine.backends.host_virtual import _libc
        self.libc = _libc()
        self.granularity = granularity
        self.handles: dict[int, tuple[int, int]] = {}      # handle -> (memory file, bytes)
        self.reserved: dict[int, int] = {}                  # base -> bytes
        self.mapped: dict[int, tuple[int, int]] = {}        # address -> (bytes, handle)
        self.created = self.released = 0
        self._ids = itertools.count(0x5000)

    def chunk(self, handle: int) -> np.ndarray:
        """A handle's bytes, read through its memory file (not through any mapping)."""
        import os
        fd, size = self.handles[handle]
        return np.frombuffer(os.pread(fd, size, 0), np.uint8)

    def driver_calls(self) -> dict:
        import mmap
        import os
        vm, ok, bad = self, 0, 1
        PAGE_FLAGS = mmap.MAP_SHARED | 0x10          # MAP_FIXED

        def granular(*ns):
            return all(int(n) % vm.granularity == 0 for n in ns)

        def inside_reservation(ptr, size):
            return any(b <= ptr and ptr + size <= b + n for b, n in vm.reserved.items())

        def overlaps_mapping(ptr, size):
            return any(a < ptr + size and ptr < a + n for a, (n, _) in vm.mapped.items())

        def create(size, prop, flags):
            if not granular(size) or size <= 0 or prop.type != "pinned" or prop.location.type != "device":
                return (bad, None)
            fd = os.memfd_create("fake-cuda-chunk")
            os.ftruncate(fd, int(size))
            handle = next(vm._ids)
            vm.handles[handle] = (fd, int(size))
            vm.created += 1
            return (ok, handle)

        def release(handle):
            entry = vm.handles.pop(handle, None)
            if entry is None:
                return (bad,)
            os.close(entry[0])
            vm.released += 1
            return (ok,)

        def reserve(size, alignment, addr, flags):
            if not granular(size):
                return (bad, 0)
            size, align = int(size), max(int(alignment), vm.granularity)
            raw = vm.libc.mmap(None, size + align, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
            ptr = -(-raw // align) * align                 # aligned as asked: trim the ends
            if ptr > raw:
                vm.libc.munmap(raw, ptr - raw)
            vm.libc.munmap(ptr + size, raw + align - ptr)
            vm.reserved[ptr] = size
            return (ok, ptr)

        def address_free(ptr, size):
            if vm.reserved.get(ptr) != size or overlaps_mapping(ptr, size):
                return (bad,)
            del vm.reserved[ptr]
            vm.libc.munmap(ptr, size)
            return (ok,)

        def map_(ptr, size, offset, handle, flags):
            entry = vm.handles.get(handle)
            if (entry is None or not granular(ptr, size, offset) or offset + size > entry[1]
                    or not inside_reservation(ptr, size) or overlaps_mapping(ptr, size)):
                return (bad,)
            got = vm.libc.mmap(ptr, size, mmap.PROT_READ | mmap.PROT_WRITE, PAGE_FLAGS, entry[0], offset)
            assert got == ptr
            vm.mapped[ptr] = (int(size), handle)
            return (ok,)

        def unmap(ptr, size):
            if vm.mapped.get(ptr, (None,))[0] != size:
                return (bad,)
            del vm.mapped[ptr]
            got = vm.libc.mmap(ptr, size, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x10, -1, 0)
            assert got == ptr
            return (ok,)

        def set_access(ptr, size, descs, count):
            covered = sum(n for a, (n, _) in vm.mapped.items() if ptr <= a and a + n <= ptr + size)
            if covered != size or count != len(descs) or any(d.flags != "rw" or d.location.type != "device"
                                                               for d in descs):
                return (bad,)
            return (ok,)

        def location():
            return SimpleNamespace(type=None, id=None)

        return dict(
            CUmemAllocationProp=lambda: SimpleNamespace(type=None, location=location()),
            CUmemAccessDesc=lambda: SimpleNamespace(flags=None, location=location()),
            CUmemAllocationType=SimpleNamespace(CU_MEM_ALLOCATION_TYPE_PINNED="pinned"),
            CUmemLocationType=SimpleNamespace(CU_MEM_LOCATION_TYPE_DEVICE="device"),
            CUmemAllocationGranularity_flags=SimpleNamespace(CU_MEM_ALLOC_GRANULARITY_MINIMUM="minimum"),
            CUmemAccess_flags=SimpleNamespace(CU_MEM_ACCESS_FLAGS_PROT_READWRITE="rw"),
            cuMemGetAllocationGranularity=lambda prop, flag: (ok, vm.granularity),
            cuMemCreate=create, cuMemRelease=release, cuMemAddressReserve=reserve,
            cuMemAddressFree=address_free, cuMemMap=map_, cuMemUnmap=unmap, cuMemSetAccess=set_access,
        )
