"""The backend interface, written down once: ``Device``, the primitives each backend implements
(CpuDevice, CudaDevice), and ``Backend``, what the executor (engine/executor.py) and profiling
(engine/profiling.py, engine/cuda_profiling.py) call: a Device wrapped in
engine/backends/instrument.Instrumented, which adds timing and the sanitizer on top of the
primitives, once for every backend.

A device owns one arena of device memory, host buffers, and three streams numbered
COMPUTE, SWAP_IN and SWAP_OUT (engine.program). Work issued on a stream runs in issue order,
asynchronously to the host; events order work across streams. ``view`` and ``host_buffer``
return the backend's own array types (numpy arrays on cpu, ``DeviceArray`` on cuda) and the
other calls take them back. The executor tolerates a backend without
``allocate_virtual_arena`` (it then refuses Programs with a page table in one line) or
whose ``capture`` returns None (it then issues every iteration); ``cpu`` and ``cuda`` have every
member, which tests/engine/backends/test_interface.py checks.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np

View = Any      # a typed window of device memory: np.ndarray (cpu), DeviceArray (cuda)


class Device(Protocol):
    name: str
    """The backend's kind ("cpu", "cuda"), for messages."""
    device_name: str
    """The device's name for the report ("" when it has none)."""
    host_calls: bool
    """Whether ``host_call`` runs (a data-parallel Program's all-reduce); False: the executor
    refuses such a Program in one line."""
    timed_capture: bool
    """Whether events recorded while capturing fire again at each replay (the capture records them
    as work), so that a timed iteration can be captured and replayed whole."""

    def allocate_arena(self, nbytes: int, scratch_bytes: int = 0) -> None:
        """A fresh arena of ``nbytes`` (poisoned), replacing any other; its last ``scratch_bytes``
        are operator scratch for kernels on the compute stream."""

    def allocate_virtual_arena(self, nbytes: int, scratch_bytes: int, mappings, virtual_bytes: int) -> None:
        """A fresh arena of ``nbytes`` physical bytes whose page-table rows (virtual offset, physical
        offset, bytes) are mapped once into ``virtual_bytes`` of addresses; views are then virtual."""

    def view(self, offset: int, shape, dtype) -> View:
        """A typed window of the arena at byte ``offset``."""

    def host_buffer(self, shape, dtype) -> np.ndarray:
        """A host array the copies may use (pinned where that matters), poisoned."""

    def read(self, view: View) -> np.ndarray:
        """A host copy of ``view``'s contents (the executor reads with the streams idle)."""

    def write(self, view: View, value: np.ndarray) -> None:
        """Set ``view`` to ``value`` now, outside the streams' order (the executor writes between
        iterations)."""

    def launch(self, stream: int, node, inputs: list, outputs: list) -> None:
        """Issue ``node``'s operator on ``stream``, reading the ``inputs`` views, writing ``outputs``."""

    def copy_h2d(self, stream: int, dst: View, src: np.ndarray) -> None:
        """Issue a copy of host buffer ``src`` into device view ``dst`` on ``stream``."""

    def copy_d2h(self, stream: int, dst: np.ndarray, src: View) -> None:
        """Issue a copy of device view ``src`` into host buffer ``dst`` on ``stream``."""

    def host_call(self, stream: int, fn: Callable[[], None]) -> None:
        """Run host function ``fn`` on ``stream`` in its order (ALLREDUCE, a fourth stream, made
        on first use; ``record`` and ``wait`` take it too)."""

    def fill(self, stream: int, view: View, byte: int) -> None:
        """Issue: set every byte of ``view`` to ``byte`` (the sanitizer's poison)."""

    def delay(self, stream: int, seconds: float) -> None:
        """Issue: hold ``stream`` back for ``seconds`` (the sanitizer's jitter)."""

    def record(self, stream: int, timed: bool = False) -> Any:
        """An event that fires when the work issued on ``stream`` so far has finished; ``timed``:
        one ``elapsed`` can read."""

    def wait(self, stream: int, ev: Any) -> None:
        """Make later work on ``stream`` wait for event ``ev``."""

    def elapsed(self, start: Any, end: Any) -> float:
        """Seconds between two timed events that have fired."""

    def capture(self, issue: Callable[[], None]) -> Any:
        """What ``issue()`` submits, recorded as a graph for ``replay`` (not run), or None: then the
        executor calls ``issue`` every iteration."""

    def replay(self, graph: Any) -> None:
        """Issue one run of a graph ``capture`` returned."""

    def synchronize(self) -> None:
        """Wait until every stream is idle (an error in their work surfaces here); finished
        kernels' and copies' times then land in ``timings``."""

    def close(self) -> None:
        """Free the arena and end the streams; host buffers stay valid while arrays use them."""


class Backend(Device, Protocol):
    """A Device with timing and the sanitizer (instrument.Instrumented): what the executor holds."""
    sanitize: bool
    """Whether each instruction is preceded by a random delay and its destination poisoned."""
    timings: list[tuple[int, int, float, float]] | None
    """None, or a list that receives (stream, node id or bytes copied or -1 for a host call,
    start s, end s) of every kernel, copy and host call by the next ``synchronize``; setting it
    starts or stops timing."""
