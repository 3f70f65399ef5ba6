"""The CUDA backend: the executor's device layer on one NVIDIA GPU, through cuda-python.

The same calls as the CPU backend (engine/backends/cpu.py), so the executor runs
unchanged: one device allocation is the arena and ``view`` returns typed windows of it
(:class:`DeviceArray`); ``host_buffer`` returns numpy arrays in pinned host memory;
``launch`` runs an operator's kernels, as its ``cuda_launches`` describes them, on the
compute stream; ``copy_h2d``/``copy_d2h`` are asynchronous copies on the swap streams;
``record``/``wait`` are CUDA events; ``capture`` records one iteration as a CUDA graph
that ``replay`` launches. ``timings``, when a list, receives (stream, node id or bytes,
start s, end s) of every kernel group and copy, timed with CUDA events.

The sanitizer (``sanitize=True``), as on the CPU backend: before each instruction a
random delay on its stream (a spinning kernel, engine/backends/sanitizer.cu), and the
memory an instruction is about to overwrite is poisoned first (0xFF, NaN for floats), so
a read that no edge orders before the overwrite sees garbage instead of, by luck, the old
value. It issues every iteration afresh (no CUDA graph), so each draws new delays.

Nothing CUDA is created until ``detect_gpu`` has found a device: without one the
constructor raises :class:`CudaUnavailable` before touching cuda.core. This module and
``nvrtc`` are the only ones that import cuda.

A virtual-addressing arena (paper 001's ``va`` allocator; ``allocate_virtual_arena``) is a
reserved virtual range (``cuMemAddressReserve``) into which the Program's page-table rows map
physical chunks (``cuMemCreate`` handles of the rows' common size, a multiple of the device's
allocation granularity, ``cuMemMap`` + ``cuMemSetAccess``); views address the virtual range. A
static Program maps every row once and unmaps only when the arena goes (after every stream is
idle, so after the last use's event); the chunk handles stay cached for the next virtual arena
and are released on ``close``. Its operator scratch is a separate allocation of
``scratch_bytes``, counted in the same budget.

Scratch memory for operators that declare it (``Op.cuda_workspaces``) is the arena's
last ``scratch_bytes`` (``Arena.scratch_bytes``: ``planner.facts.GraphFacts.scratch``, counted in the
budget): kernels run in order on the compute stream, so they share it, and nothing is
ever allocated beside the arena.
"""
from __future__ import annotations

import math
import random
import warnings
from dataclasses import dataclass

import numpy as np

from ops import registry as op_registry
from ops.workspace import workspace_bytes, workspace_offsets

from ..program import COMPUTE, SWAP_IN, SWAP_OUT
from . import nvrtc
from .detect import detect_gpu
from .pinned import PinnedHostMemory
from ..errors import EngineError

POISON = 0xFF


def _cuda_api():
    """(cuda.bindings.driver, cuda.core), imported only once detect_gpu has found a device."""
    import cuda.core
    from cuda.bindings import driver
    return driver, cuda.core


class CudaUnavailable(EngineError, RuntimeError):
    """No usable CUDA device (the reason comes from detect_gpu)."""


class CudaError(RuntimeError):
    """A CUDA driver call failed."""


class CudaVirtualMemoryError(EngineError, ValueError):
    """A page table this device cannot map (rows not multiples of its allocation granularity)."""


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

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, key):
        """1-D slices with step 1 (as measure_link takes ``dev[:n]``)."""
        if self.ndim != 1 or not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("a DeviceArray takes only 1-D slices with step 1")
        start, stop, _ = key.indices(self.shape[0])
        stop = max(start, stop)
        return DeviceArray(self.ptr + start * self.dtype.itemsize, (stop - start,), self.dtype)


def _overlap(a: DeviceArray, b: DeviceArray) -> bool:
    return a.ptr < b.ptr + b.nbytes and b.ptr < a.ptr + a.nbytes


@dataclass
class CudaGraph:
    graph: object            # cuda.core.graph.Graph
    issue: object            # the captured issue(), re-run eagerly when timing
    generation: int          # the arena it was captured against


class CudaBackend:
    name = "cuda"

    def __init__(self, device: int = 0, graphs: bool = True, sanitize: bool = False, seed: int = 0,
                 jitter_s: float | tuple[float, float, float] = 100e-6):
        """``graphs``: capture each iteration as a CUDA graph (else every instruction is issued
        from Python every iteration). ``sanitize``: a random delay of up to ``jitter_s`` (for
        all streams, or per stream: compute, swap-in, swap-out) before each instruction,
        drawn from ``seed``, and poisoned destinations; no graphs."""
        count, reason = detect_gpu()
        if count == 0:
            raise CudaUnavailable(f"no CUDA device: {reason}")
        if not 0 <= device < count:
            raise CudaUnavailable(f"no CUDA device {device}: {count} found")
        driver, core = _cuda_api()
        self._driver, self._launch, self._LaunchConfig, self._ObjectCode = \
            driver, core.launch, core.LaunchConfig, core.ObjectCode
        self.dev = core.Device(device)
        self.dev.set_current()
        self.arch = f"sm_{self.dev.arch}"
        self.device_name = self.dev.name
        self.streams = [self.dev.create_stream() for _ in range(3)]
        self._handles = [int(s.handle) for s in self.streams]
        self._timing = core.EventOptions(timing_enabled=True)
        self._pinned = PinnedHostMemory(core.LegacyPinnedMemoryResource())
        self._cubins = nvrtc.compile_all(self.arch)      # name -> cubin; cached on disk
        self._modules: dict[int, object] = {}
        self._kernels: dict[str, object] = {}
        self.use_graphs = graphs and not sanitize
        self.sanitize = sanitize
        self._rng = random.Random(seed)
        self._jitter_ns = [int(j * 1e9) for j in (jitter_s if isinstance(jitter_s, tuple) else (jitter_s,) * 3)]
        self._delay = None
        if sanitize:
            module = self._ObjectCode.from_cubin(nvrtc.compile_sanitizer(self.arch))
            self._delay = (module.get_kernel("sanitizer_delay"), self._LaunchConfig(grid=1, block=1))
        self._arena_ptr, self._arena_bytes, self._generation = 0, 0, 0
        self._scratch_ptr, self._scratch_bytes = 0, 0     # the arena's tail, for the compute stream
        self._virtual: dict | None = None   # a virtual arena: base, size, mapped (ptr, bytes), scratch ptr
        self._chunks: dict[int, int] = {}   # physical chunk index -> cuMemCreate handle (cached)
        self._chunk_bytes = 0               # the size of the cached chunks
        self._prepared: dict = {}
        self._dry = False                  # capture's first pass: launches prepared, nothing issued
        self._capturing = False
        self._timings: list | None = None
        self._pending: list = []
        self._ref = None
        self._closed = False

    # ------------------------------------------------------------------ errors
    def _check(self, result):
        err = result[0]
        if err != self._driver.CUresult.CUDA_SUCCESS:
            _, name = self._driver.cuGetErrorName(err)
            raise CudaError(f"CUDA driver call failed: {name.decode() if isinstance(name, bytes) else name}")
        return result[1:]

    # ------------------------------------------------------------------ memory
    def _device_alloc(self, nbytes: int) -> int:
        """cuMemAlloc: synchronous and outside any memory pool, so a freed arena goes back to
        the device at once and nothing is ever allocated in stream order inside a graph."""
        (ptr,) = self._check(self._driver.cuMemAlloc(max(int(nbytes), 1)))
        return int(ptr)

    def _device_free(self, ptr: int) -> None:
        if ptr:
            self._check(self._driver.cuMemFree(ptr))

    def allocate_arena(self, nbytes: int, scratch_bytes: int = 0) -> None:
        """The arena: one device allocation of ``nbytes``, filled with 0xFF bytes (NaN for
        floats); its last ``scratch_bytes`` are operator scratch for the compute stream."""
        if not 0 <= scratch_bytes <= nbytes:
            raise ValueError(f"scratch of {scratch_bytes} bytes does not fit an arena of {nbytes}")
        self._sync_all()
        self._free_arena()
        self._prepared.clear()
        self._generation += 1
        self._arena_ptr = self._device_alloc(nbytes)
        self._arena_bytes = int(nbytes)
        self._scratch_ptr = self._arena_ptr + int(nbytes) - int(scratch_bytes)
        self._scratch_bytes = int(scratch_bytes)
        self._check(self._driver.cuMemsetD8Async(self._arena_ptr, POISON, max(int(nbytes), 1),
                                                 self._handles[COMPUTE]))
        self.streams[COMPUTE].sync()

    def _free_arena(self) -> None:
        """Give back the current arena: a plain allocation, or a virtual one's mappings, its
        reservation and its scratch (its physical chunks stay cached). Streams must be idle."""
        if self._virtual is not None:
            drv, v = self._driver, self._virtual
            self._virtual = None
            for ptr, size in v["mapped"]:
                self._check(drv.cuMemUnmap(ptr, size))
            self._check(drv.cuMemAddressFree(v["base"], v["size"]))
            self._device_free(v["scratch"])
        else:
            self._device_free(self._arena_ptr)
        self._arena_ptr, self._arena_bytes, self._scratch_ptr, self._scratch_bytes = 0, 0, 0, 0

    def _allocation_prop(self):
        drv = self._driver
        prop = drv.CUmemAllocationProp()
        prop.type = drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        prop.location.id = self.dev.device_id
        return prop

    def allocation_granularity(self) -> int:
        """The smallest physical chunk this device maps (cuMemGetAllocationGranularity)."""
        drv = self._driver
        (gran,) = self._check(drv.cuMemGetAllocationGranularity(
            self._allocation_prop(), drv.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM))
        return int(gran)

    def _chunk_handle(self, index: int, chunk_bytes: int):
        """Physical chunk ``index`` (cuMemCreate on first use, then cached)."""
        if chunk_bytes != self._chunk_bytes:
            self._release_chunks()
            self._chunk_bytes = chunk_bytes
        handle = self._chunks.get(index)
        if handle is None:
            (handle,) = self._check(self._driver.cuMemCreate(chunk_bytes, self._allocation_prop(), 0))
            self._chunks[index] = handle
        return handle

    def _release_chunks(self) -> None:
        for handle in self._chunks.values():
            self._check(self._driver.cuMemRelease(handle))
        self._chunks.clear()

    def allocate_virtual_arena(self, nbytes: int, scratch_bytes: int, mappings, virtual_bytes: int) -> None:
        """A virtual-addressing arena: page-table rows (virtual, physical, bytes) mapped once into a
        reserved range of ``virtual_bytes``, poisoned; scratch beside it. ``view`` offsets are virtual."""
        drv = self._driver
        rows = np.asarray(mappings, dtype=np.int64).reshape(-1, 3)
        gran = self.allocation_granularity()
        if len(rows) and (rows % gran).any():
            raise CudaVirtualMemoryError(f"the page table's chunks are not multiples of this GPU's allocation "
                                         f"granularity ({gran // 2**20} MiB): choose --chunk-mib a multiple of it")
        if not 0 <= scratch_bytes <= nbytes:
            raise ValueError(f"scratch of {scratch_bytes} bytes does not fit an arena of {nbytes}")
        chunk = int(np.gcd.reduce(rows[:, 1:].reshape(-1))) if len(rows) else gran
        self._sync_all()
        self._free_arena()
        self._prepared.clear()
        self._generation += 1
        size = max(gran, -(-int(virtual_bytes) // gran) * gran)
        (base,) = self._check(drv.cuMemAddressReserve(size, gran, 0, 0))
        base = int(base)
        self._virtual = v = {"base": base, "size": size, "mapped": [], "scratch": 0}
        access = drv.CUmemAccessDesc()
        access.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        access.location.id = self.dev.device_id
        access.flags = drv.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        stream = self._handles[COMPUTE]
        for virt, phys, n in rows.tolist():
            for k in range(0, n, chunk):
                self._check(drv.cuMemMap(base + virt + k, chunk, 0, self._chunk_handle((phys + k) // chunk, chunk), 0))
                v["mapped"].append((base + virt + k, chunk))
            self._check(drv.cuMemSetAccess(base + virt, n, [access], 1))
            self._check(drv.cuMemsetD8Async(base + virt, POISON, n, stream))
        if scratch_bytes:
            v["scratch"] = self._device_alloc(scratch_bytes)
            self._check(drv.cuMemsetD8Async(v["scratch"], POISON, int(scratch_bytes), stream))
        self._arena_ptr, self._arena_bytes = base, size
        self._scratch_ptr, self._scratch_bytes = v["scratch"], int(scratch_bytes)
        self.streams[COMPUTE].sync()

    def view(self, offset: int, shape, dtype) -> DeviceArray:
        dtype = np.dtype(dtype)
        shape = tuple(int(d) for d in shape)
        end = int(offset) + math.prod(shape) * dtype.itemsize
        if not self._arena_ptr or offset < 0 or end > self._arena_bytes:
            raise ValueError(f"view [{offset}, {end}) lies outside the arena of {self._arena_bytes} bytes")
        return DeviceArray(self._arena_ptr + int(offset), shape, dtype)

    def host_buffer(self, shape, dtype) -> np.ndarray:
        """A numpy array in pinned (page-locked) host memory, filled with 0xFF bytes."""
        return self._pinned.array(shape, dtype, POISON)

    def read(self, view: DeviceArray) -> np.ndarray:
        """A host copy of ``view`` once every stream is idle."""
        self._sync_all()
        out = np.empty(view.shape, view.dtype)
        if view.nbytes:
            self._check(self._driver.cuMemcpyDtoH(out.ctypes.data, view.ptr, view.nbytes))
        return out

    def write(self, view: DeviceArray, value) -> None:
        a = np.ascontiguousarray(value, dtype=view.dtype)
        if a.size != view.size:
            raise ValueError(f"cannot write {a.size} elements into a view of {view.size}")
        self._sync_all()
        if view.nbytes:
            # Not cuMemcpyHtoD: from pageable memory it may return before the bytes land, on the
            # legacy stream that our non-blocking streams do not wait for.
            self._check(self._driver.cuMemcpyHtoDAsync(view.ptr, a.ctypes.data, view.nbytes,
                                                       self._handles[COMPUTE]))
            self.streams[COMPUTE].sync()

    def _scratch_for(self, stream: int, node, need: int) -> int:
        """The scratch region's address for a node needing ``need`` bytes (0 if none)."""
        if need == 0:
            return 0
        if stream != COMPUTE:
            raise CudaError(f"'{node.op}' needs scratch, which only kernels on the compute stream may use")
        if need > self._scratch_bytes:
            raise CudaError(f"'{node.op}' (node {node.id}) needs {need} bytes of operator scratch but the "
                            f"arena reserves {self._scratch_bytes}: the Program was planned for another graph; plan "
                            "it for this one (its Arena.scratch_bytes is planner.facts.GraphFacts.scratch)")
        return self._scratch_ptr

    # ------------------------------------------------------------------ kernels
    def _kernel(self, name: str):
        k = self._kernels.get(name)
        if k is None:
            cubin = self._cubins.get(name)
            if cubin is None:
                raise CudaError(f"no compiled CUDA kernel named '{name}'")
            module = self._modules.get(id(cubin))
            if module is None:
                module = self._modules[id(cubin)] = self._ObjectCode.from_cubin(cubin)
            k = module.get_kernel(name)
            k.attributes.num_regs     # loads the module now, not during a graph capture
            self._kernels[name] = k
        return k

    def _prepare(self, stream: int, node, inputs, outputs):
        """[(kernel, LaunchConfig, args)] for one node, its tensors at these addresses."""
        decl = op_registry.get(node.op)
        launches = decl.cuda_launches(node.attrs, inputs, outputs)
        sizes = tuple(decl.cuda_workspaces(node.attrs, inputs, outputs))
        base = self._scratch_for(stream, node, workspace_bytes(sizes))
        offsets = workspace_offsets(sizes)
        refs = {"in": lambda i: inputs[i].ptr, "out": lambda i: outputs[i].ptr,
                "workspace": lambda i: base + offsets[i]}
        prepared = []
        for l in launches:
            args = []
            for a in l.args:
                if isinstance(a, tuple):
                    args.append(refs[a[0]](a[1]))
                elif isinstance(a, np.generic):
                    args.append(a)
                else:
                    raise TypeError(f"{node.op}: kernel {l.kernel} argument {a!r} is not a numpy scalar")
            kernel = self._kernel(l.kernel)
            if l.shmem > 48 * 1024:
                attr = self._driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                self._check(self._driver.cuKernelSetAttribute(attr, l.shmem, kernel.handle, self.dev.device_id))
            prepared.append((kernel, self._LaunchConfig(grid=l.grid, block=l.block, shmem_size=l.shmem),
                             tuple(args)))
        return prepared

    def launch(self, stream: int, node, inputs, outputs) -> None:
        """Run ``node``'s kernels on ``stream``. Prepared launches (configs and arguments) are
        cached by operator, node id and tensor addresses."""
        key = (stream, node.op, node.id, tuple((a.ptr, a.shape, a.dtype) for a in inputs),
               tuple((a.ptr, a.shape, a.dtype) for a in outputs))
        prepared = self._prepared.get(key)
        if prepared is None:
            prepared = self._prepared[key] = self._prepare(stream, node, inputs, outputs)
        if self._dry:
            return
        st, launch = self.streams[stream], self._launch
        if self.sanitize:
            self._jitter(stream)
            for y in outputs:
                if not any(_overlap(y, x) for x in inputs):     # in-place updates keep their input
                    self._poison(stream, y)

        def run():
            for kernel, config, args in prepared:
                launch(st, config, kernel, *args)
        self._timed(stream, node.id, run)

    # ------------------------------------------------------------------ copies and events
    def _copy_args(self, dev: DeviceArray, host: np.ndarray) -> int:
        if not isinstance(dev, DeviceArray) or not isinstance(host, np.ndarray):
            raise TypeError("copies go between a DeviceArray and a numpy array from host_buffer")
        if dev.nbytes != host.nbytes or not host.flags.c_contiguous:
            raise ValueError(f"copy of {host.nbytes} contiguous host bytes to/from {dev.nbytes} device bytes")
        if host.nbytes and not self._pinned.contains(host.ctypes.data, host.nbytes):
            raise ValueError("asynchronous copies need host memory from CudaBackend.host_buffer (pinned)")
        return host.nbytes

    def copy_h2d(self, stream: int, dst: DeviceArray, src: np.ndarray) -> None:
        n = self._copy_args(dst, src)
        if n == 0 or self._dry:
            return
        if self.sanitize:
            self._jitter(stream)
            self._poison(stream, dst)
        d = self._driver
        self._timed(stream, n, lambda: self._check(d.cuMemcpyHtoDAsync(dst.ptr, src.ctypes.data, n,
                                                                      self._handles[stream])))

    def copy_d2h(self, stream: int, dst: np.ndarray, src: DeviceArray) -> None:
        n = self._copy_args(src, dst)
        if n == 0 or self._dry:
            return
        if self.sanitize:
            self._jitter(stream)
        d = self._driver
        self._timed(stream, n, lambda: self._check(d.cuMemcpyDtoHAsync(dst.ctypes.data, src.ptr, n,
                                                                      self._handles[stream])))

    host_calls = False      # a data-parallel Program's all-reduce (cuLaunchHostFunc) is not wired yet

    def host_call(self, stream: int, fn) -> None:
        raise CudaUnavailable("the cuda backend cannot run a data-parallel Program's all-reduce yet; run the ranks "
                              "on the cpu backend")

    def record(self, stream: int):
        return None if self._dry else self.streams[stream].record()

    def wait(self, stream: int, ev) -> None:
        if not self._dry:
            self.streams[stream].wait(ev)

    # ------------------------------------------------------------------ sanitizer
    def _jitter(self, stream: int) -> None:
        """Hold ``stream`` back for a random time of up to its jitter."""
        if self._jitter_ns[stream]:
            kernel, config = self._delay
            ns = np.uint64(self._rng.randrange(self._jitter_ns[stream] + 1))
            self._launch(self.streams[stream], config, kernel, ns)

    def _poison(self, stream: int, view: DeviceArray) -> None:
        if view.nbytes:
            self._check(self._driver.cuMemsetD8Async(view.ptr, POISON, view.nbytes, self._handles[stream]))

    # ------------------------------------------------------------------ timing
    @property
    def timings(self):
        return self._timings

    @timings.setter
    def timings(self, value) -> None:
        """A list starts timing: every stream drains and a reference event is recorded, so
        times are seconds after this moment; None stops it."""
        self._sync_all()
        self._pending.clear()
        self._timings = value
        if value is not None:
            self._ref = self.streams[COMPUTE].record(options=self._timing)
            self._ref.sync()

    def _timed(self, stream: int, what: int, issue) -> None:
        if self._timings is None or self._capturing:
            issue()
            return
        st = self.streams[stream]
        start = st.record(options=self._timing)
        issue()
        self._pending.append((stream, what, start, st.record(options=self._timing)))

    # ------------------------------------------------------------------ graphs
    def capture(self, issue):
        """Record what ``issue()`` submits as a CUDA graph, or None when graphs are off or the
        capture fails (then the executor issues eagerly). A first pass issues nothing: it
        prepares every launch, so modules load and operator errors surface before capturing."""
        if not self.use_graphs:
            return None
        self._dry = True
        try:
            issue()
        finally:
            self._dry = False
        self._sync_all()
        compute = self.streams[COMPUTE]
        builder = compute.create_graph_builder()
        builder.begin_building("relaxed")
        self._capturing = True
        try:
            fork = compute.record()                      # the swap streams join the capture
            for s in (SWAP_IN, SWAP_OUT):
                self.streams[s].wait(fork)
            issue()
            for s in (SWAP_IN, SWAP_OUT):                # and rejoin the compute stream
                compute.wait(self.streams[s])
            builder.end_building()
            graph = builder.complete()
        except (op_registry.OpError, ValueError, TypeError, KeyError):
            self._abandon_capture(builder)
            raise
        except Exception as e:      # a CUDA refusal: run without graphs rather than not at all
            self._abandon_capture(builder)
            warnings.warn(f"CUDA graph capture failed ({e}); issuing each instruction instead")
            return None
        finally:
            self._capturing = False
        return CudaGraph(graph, issue, self._generation)

    def _abandon_capture(self, builder) -> None:
        self._capturing = False
        try:
            builder.close()          # ends the capture if it is still open
        except Exception:
            pass
        self.streams = [self.dev.create_stream() for _ in range(3)]
        self._handles = [int(s.handle) for s in self.streams]
        self._prepared.clear()

    def replay(self, graph: CudaGraph) -> None:
        if graph.generation != self._generation:
            raise CudaError("this graph was captured against an arena that has since been replaced")
        if self._timings is not None:
            graph.issue()            # eagerly, so each kernel and copy is timed
        else:
            graph.graph.launch(self.streams[COMPUTE])

    # ------------------------------------------------------------------ sync and teardown
    def _sync_all(self) -> None:
        for s in self.streams:
            s.sync()

    def synchronize(self) -> None:
        """Wait for every stream; then hand finished timings to ``timings``."""
        self._sync_all()
        if self._pending and self._timings is not None:
            ref = self._ref
            self._timings.extend((s, what, (e0 - ref) / 1e3, (e1 - ref) / 1e3) for s, what, e0, e1 in self._pending)
        self._pending.clear()

    def close(self) -> None:
        """Free the arena and scratch. Host buffers stay valid while numpy arrays use them."""
        if self._closed:
            return
        self._closed = True
        try:
            self._sync_all()
        finally:
            self._prepared.clear()
            self._pending.clear()
            try:
                self._free_arena()
            finally:
                self._release_chunks()
                self._pinned.forget()
