"""Timing and the sanitizer, above every backend: written once, issued as the device's own primitives.

``Instrumented`` wraps a device (CpuDevice, CudaDevice: the primitives of interface.Device) and is
what the executor, profiling and the benchmarks hold as their backend; every other member passes
through to the device.

Timing: while ``timings`` is a list, each kernel group, copy and host call is bracketed by two
timed events on its stream, and ``synchronize`` appends (stream, node id or bytes copied or -1 for
a host call, start s, end s), seconds after timing began. A captured iteration is then captured
afresh with its events and replayed whole where the device's capture records events as work
(``timed_capture``: the cpu's work lists, so the streams run it back to back, as untimed; issued
from Python instruction by instruction, a fast stream would wait on the issuing thread and its gaps
would count that), else issued eagerly (cuda: a CUDA graph holds no timing events).

The sanitizer (``sanitize=True``): before each instruction a random delay of up to its stream's
jitter (``device.delay``), and the memory it is about to overwrite is poisoned first (0xFF bytes:
NaN for floats, -1 for integers; an in-place update keeps its input), so a read that no edge orders
before the overwrite sees garbage instead of, by luck, the old value. Nothing is captured: each
iteration is issued afresh and draws new delays.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from ..program import COMPUTE

POISON = 0xFF


@dataclass
class Captured:
    graph: object      # the device's captured iteration
    issue: object      # what was captured, issued eagerly while timing


def _span(view) -> tuple[int, int]:
    """A view's bytes as (start, end) addresses: a DeviceArray's ``ptr`` or a numpy array's data."""
    start = view.ptr if hasattr(view, "ptr") else view.ctypes.data
    return start, start + view.nbytes


def _overlap(a, b) -> bool:
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < b1 and b0 < a1


class Instrumented:
    def __init__(self, device, sanitize: bool = False, seed: int = 0,
                 jitter_s: float | tuple[float, ...] = 0.5e-3):
        """``jitter_s``: with ``sanitize``, the largest delay before each instruction, for every
        stream or per stream (compute, swap-in, swap-out; a fourth, the all-reduce's, takes the most)."""
        self.device, self.sanitize = device, sanitize
        jitter = jitter_s if isinstance(jitter_s, tuple) else (jitter_s,) * 3
        self._jitter = (*jitter, max(jitter)) if sanitize else (0.0,) * 4
        rng = random.Random(seed)
        self._rngs = [random.Random(rng.random()) for _ in self._jitter]
        self._timings: list | None = None
        self._pending: list = []
        self._ref = None
        self._capturing = False

    def __getattr__(self, name):
        return getattr(self.device, name)

    # ------------------------------------------------------------------ timing
    @property
    def timings(self):
        return self._timings

    @timings.setter
    def timings(self, value) -> None:
        """A list starts timing (every stream drains first; times count from then); None stops it."""
        self.device.synchronize()
        self._pending.clear()
        self._timings = value
        if value is not None:
            self._ref = self.device.record(COMPUTE, timed=True)
            self.device.synchronize()

    def _timed(self, stream: int, what: int, issue) -> None:
        if self._timings is None or self._capturing:
            issue()
            return
        start = self.device.record(stream, timed=True)
        issue()
        self._pending.append((stream, what, start, self.device.record(stream, timed=True)))

    def synchronize(self) -> None:
        """Wait for every stream; then hand finished timings to ``timings``."""
        self.device.synchronize()
        if self._pending and self._timings is not None:
            el, ref = self.device.elapsed, self._ref
            self._timings.extend((s, what, el(ref, e0), el(ref, e1)) for s, what, e0, e1 in self._pending)
        self._pending.clear()

    # ------------------------------------------------------------------ sanitizer
    def _before(self, stream: int, overwritten=()) -> None:
        if not self.sanitize or self._capturing:
            return
        jitter = self._jitter[min(stream, 3)]
        if jitter:
            self.device.delay(stream, self._rngs[min(stream, 3)].random() * jitter)
        for view in overwritten:
            self.device.fill(stream, view, POISON)

    # ------------------------------------------------------------------ the instructions
    def launch(self, stream: int, node, inputs, outputs) -> None:
        # lazily: the overlap tests run only when sanitizing
        self._before(stream, (y for y in outputs if not any(_overlap(y, x) for x in inputs)))
        self._timed(stream, node.id, lambda: self.device.launch(stream, node, inputs, outputs))

    def copy_h2d(self, stream: int, dst, src) -> None:
        self._before(stream, [dst])
        self._timed(stream, dst.nbytes, lambda: self.device.copy_h2d(stream, dst, src))

    def copy_d2h(self, stream: int, dst, src) -> None:
        self._before(stream)
        self._timed(stream, dst.nbytes, lambda: self.device.copy_d2h(stream, dst, src))

    def host_call(self, stream: int, fn) -> None:
        self._before(stream)
        self._timed(stream, -1, lambda: self.device.host_call(stream, fn))

    # ------------------------------------------------------------------ graphs
    def capture(self, issue) -> Captured | None:
        """The device's capture of ``issue()`` (None: sanitizing, or the device captures nothing)."""
        if self.sanitize or not hasattr(self.device, "capture"):
            return None
        self._capturing = True
        try:
            graph = self.device.capture(issue)
        finally:
            self._capturing = False
        return None if graph is None else Captured(graph, issue)

    def replay(self, graph: Captured) -> None:
        if self._timings is None:
            self.device.replay(graph.graph)
        elif self.device.timed_capture:
            self.device.replay(self.device.capture(graph.issue))
        else:
            graph.issue()
