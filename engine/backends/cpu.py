"""The CPU backend: numpy kernels on views of one uint8 arena, a worker thread per stream.

Host-device copies run at an emulated link bandwidth, in chunks whose pace is
set by whether a copy in the other direction is moving at the same moment
(the duplex rate, shared), so overlap is real, not assumed. ``CpuDevice`` holds the
primitives (interface.Device); timing and the sanitizer are above it
(engine/backends/instrument.py), and ``CpuBackend(...)`` builds both.
"""
from __future__ import annotations

import itertools
import queue
import threading
import time
from dataclasses import dataclass

import numpy as np

from ops import registry as op_registry

from ..arrays import aligned_empty
from ..blas_threads import one_blas_thread
from .host_virtual import MappedArena
from .instrument import Instrumented

POISON = 0xFF
_ERRORS = itertools.count(1)      # orders stream errors as they happen, across streams


@dataclass(frozen=True)
class EmulatedLink:
    h2d_bytes_per_s: float = 2e9
    d2h_bytes_per_s: float = 2e9
    duplex_bytes_per_s: float = 3e9
    latency_s: float = 20e-6
    chunk_s: float = 2e-3        # pacing granularity


class _LinkState:
    """Which directions are moving bytes right now (shared by the two copy streams)."""

    def __init__(self, link: EmulatedLink):
        self.link = link
        self.active = [False, False]      # [h2d, d2h]
        self.lock = threading.Lock()

    def transfer(self, dst: np.ndarray, src: np.ndarray, direction: int) -> None:
        link = self.link
        one_way = link.h2d_bytes_per_s if direction == 0 else link.d2h_bytes_per_s
        deadline = time.perf_counter() + link.latency_s
        _sleep_until(deadline)
        d, s = dst.reshape(-1).view(np.uint8), src.reshape(-1).view(np.uint8)
        n, done = d.size, 0
        with self.lock:
            self.active[direction] = True
        try:
            while done < n:
                with self.lock:
                    rate = link.duplex_bytes_per_s / 2 if self.active[1 - direction] else one_way
                chunk = max(4096, int(rate * link.chunk_s))
                end = min(n, done + chunk)
                np.copyto(d[done:end], s[done:end])
                deadline += (end - done) / rate
                done = end
                _sleep_until(deadline)
        finally:
            with self.lock:
                self.active[direction] = False


def _sleep_until(deadline: float) -> None:
    delay = deadline - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


class Event:
    def __init__(self):
        self._done = threading.Event()
        self.time = 0.0          # perf_counter when its stream reached it (timed events)

    def set(self):
        self._done.set()

    def stamp(self):
        self.time = time.perf_counter()
        self._done.set()

    def wait(self):
        self._done.wait()

    def clear(self):
        self._done.clear()


class Stream:
    """An in-order queue of work run by one thread, like a CUDA stream."""

    def __init__(self, name: str):
        self.name = name
        self.q: queue.Queue = queue.Queue()
        self.error: BaseException | None = None
        self.error_order = 0                  # when it happened, among all streams' errors
        self.captured: list | None = None     # work recorded instead of queued (see CpuDevice.capture)
        self.thread = threading.Thread(target=self._work, name=f"stream-{name}", daemon=True)
        self.thread.start()

    def _work(self):
        with one_blas_thread():         # three streams, each one core's worth (engine/blas_threads.py)
            self._serve()

    def _serve(self):
        while True:
            item = self.q.get()
            if item is None:
                return
            for fn in (item if isinstance(item, list) else (item,)):   # a list: a captured graph
                self._run(fn)

    def _run(self, fn) -> None:
        try:
            if self.error is None or isinstance(fn, _Signal):
                fn()
        except BaseException as e:   # reported by synchronize(); later work is skipped
            self.error = e
            self.error_order = next(_ERRORS)

    def submit(self, fn) -> None:
        if self.captured is not None:
            self.captured.append(fn)
        else:
            self.q.put(fn)

    def record(self, timed: bool = False) -> Event:
        ev = Event()
        self.submit(_Signal(ev.stamp if timed else ev.set))
        return ev

    def wait(self, ev: Event) -> None:
        self.submit(_Signal(ev.wait))

    def close(self):
        self.q.put(None)
        self.thread.join()


class _Signal:
    """Event work: always runs (even after an error), so other streams never hang on it."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self):
        self.fn()


@dataclass
class CapturedGraph:
    work: list[list]            # per stream, in order
    events: list[Event]         # reset before each replay


def CpuBackend(link: EmulatedLink = EmulatedLink(), sanitize: bool = False, seed: int = 0,
               jitter_s: float | tuple[float, float, float] = 0.5e-3) -> Instrumented:
    """The cpu backend: a CpuDevice with timing and, with ``sanitize``, the sanitizer
    (``jitter_s``: the largest random delay before each instruction, for every stream or per
    stream: compute, swap-in, swap-out)."""
    return Instrumented(CpuDevice(link), sanitize, seed, jitter_s)


class CpuDevice:
    name = "cpu"
    device_name = ""        # the host: the report names none
    host_calls = True       # host functions on a stream: a data-parallel Program's all-reduce
    timed_capture = True    # a capture records the work itself, timing events included

    def __init__(self, link: EmulatedLink = EmulatedLink()):
        # One BLAS thread while this backend lives: set here, in the creating thread, since
        # OpenBLAS ignores a limit set from another thread, and again in each stream thread,
        # since an OpenMP build keeps it per thread (engine/blas_threads.py).
        self._blas = one_blas_thread()
        self._blas.__enter__()
        self.link = _LinkState(link)
        self.streams = [Stream(n) for n in ("compute", "swap_in", "swap_out")]
        self.arena: np.ndarray | None = None
        self._mapped: MappedArena | None = None     # a virtual-addressing arena's mappings

    # ------------------------------------------------------------------ memory
    def allocate_arena(self, nbytes: int, scratch_bytes: int = 0) -> None:
        """The arena, poisoned. Its last ``scratch_bytes`` are operator scratch, which only
        CUDA kernels use: numpy operators need none."""
        self._unmap()
        self.arena = aligned_empty((nbytes,), np.uint8, alignment=256)
        self.arena.fill(POISON)

    def allocate_virtual_arena(self, nbytes: int, scratch_bytes: int, mappings, virtual_bytes: int) -> None:
        """A virtual-addressing arena (paper 001): ``nbytes`` of physical memory (scratch, unused
        by numpy operators, included) whose page-table rows (virtual, physical, bytes) are mapped
        once into a reserved virtual range; ``view`` offsets are then virtual. Poisoned."""
        self._unmap()
        self._mapped = MappedArena(nbytes, mappings, virtual_bytes)
        self._mapped.physical.fill(POISON)
        self.arena = self._mapped.virtual

    def _unmap(self) -> None:
        """Drop a virtual arena's mappings (streams idle: nothing may touch them any more)."""
        if self._mapped is not None:
            self.arena = None
            self._mapped.close()
            self._mapped = None

    def view(self, offset: int, shape, dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        return self.arena[offset:offset + n].view(dtype).reshape(shape)

    def host_buffer(self, shape, dtype) -> np.ndarray:
        buf = aligned_empty(shape, dtype)
        buf.reshape(-1).view(np.uint8).fill(POISON)
        return buf

    def read(self, view: np.ndarray) -> np.ndarray:
        return view.copy()

    def write(self, view: np.ndarray, value: np.ndarray) -> None:
        np.copyto(view, value)

    # ------------------------------------------------------------------ work on streams
    def launch(self, stream: int, node, inputs, outputs) -> None:
        decl = op_registry.get(node.op)
        self.streams[stream].submit(lambda: decl.compute(node.attrs, inputs, outputs))

    def copy_h2d(self, stream: int, dst: np.ndarray, src: np.ndarray) -> None:
        self.streams[stream].submit(lambda: self.link.transfer(dst, src, 0))

    def copy_d2h(self, stream: int, dst: np.ndarray, src: np.ndarray) -> None:
        self.streams[stream].submit(lambda: self.link.transfer(dst, src, 1))

    def fill(self, stream: int, view: np.ndarray, byte: int) -> None:
        self.streams[stream].submit(lambda: view.reshape(-1).view(np.uint8).fill(byte))

    def delay(self, stream: int, seconds: float) -> None:
        self._stream(stream).submit(lambda: time.sleep(seconds))

    def host_call(self, stream: int, fn) -> None:
        """Run ``fn()`` on stream ``stream`` in its order: a data-parallel Program's all-reduce
        (engine.program.ALLREDUCE), on a fourth stream made when first asked for."""
        self._stream(stream).submit(fn)

    def _stream(self, k: int) -> Stream:
        while len(self.streams) <= k:        # a stream past the three: made on first use, capturing if they are
            st = Stream(f"stream{len(self.streams)}")
            st.captured = [] if self.streams[0].captured is not None else None
            self.streams.append(st)
        return self.streams[k]

    def record(self, stream: int, timed: bool = False) -> Event:
        return self._stream(stream).record(timed)

    def wait(self, stream: int, ev: Event) -> None:
        self._stream(stream).wait(ev)

    def elapsed(self, start: Event, end: Event) -> float:
        """Seconds between two timed events, both reached."""
        return end.time - start.time

    # ------------------------------------------------------------------ graphs
    def capture(self, issue) -> "CapturedGraph":
        """Record what ``issue()`` submits, instead of running it, as a graph to replay: like a
        CUDA graph, one iteration's work is built once and then costs the host 3 queue puts."""
        for st in self.streams:
            st.captured = []
        try:
            issue()
        finally:
            lists = [st.captured for st in self.streams]
            for st in self.streams:
                st.captured = None
        events = [fn.fn.__self__ for work in lists for fn in work
                  if isinstance(fn, _Signal) and fn.fn.__name__ in ("set", "stamp")]
        return CapturedGraph(lists, events)

    def replay(self, graph: "CapturedGraph") -> None:
        for ev in graph.events:
            ev.clear()
        for st, work in zip(self.streams, graph.work):
            if work:
                st.q.put(work)

    def synchronize(self) -> None:
        """Wait for every stream to drain; re-raise the error that happened first. The others
        are usually its follow-ons (a stream that waited on the failed one), so the first in
        time, not in stream order, names the cause."""
        evs = [s.record() for s in self.streams]
        for e in evs:
            e.wait()
        failed = sorted((s for s in self.streams if s.error is not None), key=lambda s: s.error_order)
        if failed:
            err = failed[0].error
            for s in failed:
                s.error = None
            raise err

    def close(self) -> None:
        for s in self.streams:
            s.close()
        if self._blas is not None:      # after the streams: the creating thread restores the limit
            self._blas.__exit__(None, None, None)
            self._blas = None
        self._unmap()                   # after the streams: nothing touches the mappings any more
