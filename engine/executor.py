"""The executor: issues a verified Program's instructions to a backend, every iteration.

It never decides anything. Instructions go to their stream in program order;
a dependency on another stream becomes an event recorded after the producer
and waited on before the consumer. Between iterations the streams drain, and
each state's next value becomes its current value: in place for state that is
resident (its home object); for the rest, the two host buffers of the current
and next value trade places (nothing is copied: copying a large model's swapped
parameters and optimizer state on the host cost 80-120 ms per iteration on an
H100, a third of the iteration, outside every stream).

It follows the Trainer's runner protocol: load_state, step, state.
"""
from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Mapping

import numpy as np

from .errors import EngineError
from .ir import Graph, Kind, PERSISTENT_KINDS
from .program import ALLREDUCE, COMPUTE, SWAP_IN, SWAP_OUT, Program, sharing_objects

if TYPE_CHECKING:
    from .backends.interface import Backend


class VirtualArenaUnsupported(EngineError, ValueError):
    """A Program with a page table given to a backend that cannot map one."""


class AllReduceUnsupported(EngineError, ValueError):
    """A Program with all-reduce instructions handed to the executor."""


class ProgramExecutor:
    def __init__(self, program: Program, g: Graph, backend: Backend, reduce=None):
        """``reduce``: for a data-parallel Program (ALLREDUCE instructions), a function from a
        bucket's arrays (this rank's) to their sums across the ranks, called on the all-reduce
        stream in the Program's order."""
        self.p, self.g, self.backend, self.reduce = program, g, backend, reduce
        if any(ins.kind == ALLREDUCE for ins in program.instrs):
            if reduce is None or not getattr(backend, "host_calls", False):
                raise AllReduceUnsupported(
                    f"this plan all-reduces gradients across {program.ranks} ranks inside the Program; it runs only "
                    f"as a rank with a collective (engine/library/ranks.py), on a backend that can call the host from "
                    f"a stream (the cpu backend)")
        arena = program.arena
        if arena.virtual:     # objects are virtual ranges: the backend maps the page table once
            if not hasattr(backend, "allocate_virtual_arena"):
                raise VirtualArenaUnsupported(f"the {getattr(backend, 'name', 'chosen')} backend cannot map a "
                                              "virtual-addressing arena (allocator 'va'): use the cpu or cuda backend")
            backend.allocate_virtual_arena(int(arena.arena_bytes), int(arena.scratch_bytes), arena.mappings,
                                           int(arena.virtual_bytes))
        else:
            backend.allocate_arena(int(arena.arena_bytes), int(arena.scratch_bytes))
        self.host: dict[int, np.ndarray] = {}
        for t in self._host_tensors():
            x = g.tensors[t]
            self.host[t] = backend.host_buffer(x.shape, x.dtype)
        self.plan = [self._prepare(i, ins) for i, ins in enumerate(program.instrs)]
        # Events only for instructions that another stream waits on.
        kinds = [ins.kind for ins in program.instrs]
        self.signals = {d for ins in program.instrs for d in ins.deps if kinds[d] != ins.kind}
        final = self._final_tenants()
        self.loss_location = self._final_location(g.loss, final) if g.loss is not None else None
        self.output_locations = {t: self._final_location(t, final) for t in g.outputs}
        # State whose current value starts on the host: its buffer trades places with its next
        # value's after each iteration, so odd iterations run with the buffers the other way round.
        self.traded = [(cur, nxt) for cur, nxt in g.state_pairs if cur not in program.initial_resident]
        self.trade_partner = {**{nxt: cur for cur, nxt in self.traded}, **dict(self.traded)}
        self.odd = False
        self.issue_cpu_seconds = 0.0     # the last step's CPU time issuing or replaying its work
        # Backends that can capture an iteration (a CUDA graph; the CPU backend's work lists)
        # build it once and replay it; the host then does no per-instruction work. A captured
        # iteration holds the host buffers themselves: one capture per arrangement of them.
        self.graphs = self._capture_both_arrangements() if hasattr(backend, "capture") else None

    def _capture_both_arrangements(self):
        """(capture with the buffers as they are, capture with every traded pair swapped), or
        None when the backend captures nothing (graphs off). One capture when nothing trades."""
        even = self.backend.capture(self.issue)
        if even is None or not self.traded:
            return None if even is None else (even, even)
        self._trade_host_buffers()
        try:
            odd = self.backend.capture(self.issue)
        finally:
            self._trade_host_buffers()
        return (even, odd) if odd is not None else None

    def _trade_host_buffers(self) -> None:
        for cur, nxt in self.traded:
            self.host[cur], self.host[nxt] = self.host[nxt], self.host[cur]
        self.odd = not self.odd

    @property
    def graph(self):
        """The captured iteration the next step replays (None: issued instruction by instruction)."""
        return None if self.graphs is None else self.graphs[self.odd]

    def _host_tensors(self) -> set[int]:
        g = self.g
        ts = set(g.leaves(Kind.INPUT, Kind.LABEL, *PERSISTENT_KINDS))
        ts.update(nxt for _, nxt in g.state_pairs)
        ts.update(ins.target for ins in self.p.instrs if ins.kind in (SWAP_IN, SWAP_OUT))
        ts.update(g.read_back())
        return ts

    def _view(self, t: int, o: int):
        """Tensor t in object o: at the object's offset (a virtual offset under a page table)."""
        x = self.g.tensors[t]
        return self.backend.view(int(self.p.arena.object_offset[o]), x.shape, x.dtype)

    def _prepare(self, i, ins):
        if ins.kind == ALLREDUCE:
            return [self._view(t, o) for t, o in zip(ins.bucket, ins.objects)]
        if ins.kind == COMPUTE:
            node = self.g.nodes[ins.target]
            ts = list(node.inputs) + list(node.outputs)
            views = [self._view(t, o) for t, o in zip(ts, ins.objects)]
            return node, views[:len(node.inputs)], views[len(node.inputs):]
        return self._view(ins.target, ins.obj)

    def _final_tenants(self) -> list[int]:
        """Per object, the tensor it holds at the end of the iteration (-1: none whole). A write
        into an object clobbers every object sharing bytes with it (an online allocator's
        objects may overlap; program order is a valid order of such writes)."""
        sharing = sharing_objects(self.p.arena)
        tenant = [-1] * self.p.arena.num_objects

        def write(t: int, o: int) -> None:
            for x in sharing[o]:
                tenant[x] = -1
            tenant[o] = t

        for ins in self.p.instrs:
            if ins.kind == COMPUTE:
                node = self.g.nodes[ins.target]
                for o, t in zip(ins.objects[len(node.inputs):], node.outputs):
                    write(t, o)
            elif ins.kind == SWAP_IN:
                write(ins.target, ins.obj)
        return tenant

    def _final_location(self, t: int, tenant: list[int]):
        """The view holding t at the end of the iteration, or None if only its host copy has it
        (the verifier checks that one of them does)."""
        objs = [o for o, x in enumerate(tenant) if x == t]
        return self._view(t, objs[0]) if objs else None

    # ------------------------------------------------------------------ runner protocol
    def load_state(self, state: Mapping[int, np.ndarray]) -> None:
        """Host copies of every parameter and state; resident ones also go to their home object."""
        for t in self.g.leaves(*PERSISTENT_KINDS):
            np.copyto(self.host[t], state[t])
        for t, o in self.p.initial_resident.items():
            self.backend.write(self._view(t, o), state[t])

    def state(self) -> dict[int, np.ndarray]:
        out = {}
        for t in self.g.leaves(*PERSISTENT_KINDS):
            o = self.p.initial_resident.get(t)
            out[t] = self.backend.read(self._view(t, o)) if o is not None else self.host[t].copy()
        return out

    def step(self, batch: Mapping[int, np.ndarray]) -> float:
        """Run one iteration on this batch (inputs and labels); return its loss (nan for a
        graph without one: read an inference graph's results with ``outputs``)."""
        for t, a in batch.items():
            np.copyto(self.host[t], a)
        c0 = time.process_time()
        if self.graph is not None:
            self.backend.replay(self.graph)
        else:
            self.issue()
        self.issue_cpu_seconds = time.process_time() - c0     # the host's cost of handing work over
        self.backend.synchronize()
        # Resident state's next value already sits in its home object; the rest's host buffer
        # becomes the current value's.
        self._trade_host_buffers()
        if self.g.loss is None:
            return float("nan")
        return float(self._read_back(self.g.loss, self.loss_location))

    def outputs(self) -> dict[int, np.ndarray]:
        """The graph's outputs after the last ``step`` (copies)."""
        return {t: np.array(self._read_back(t, where)) for t, where in self.output_locations.items()}

    def _read_back(self, t: int, where):
        """t's value in the last step: on the device, else in its host buffer (for a traded
        state, the buffer that has since traded places with its partner's)."""
        if where is not None:
            return self.backend.read(where)
        return self.host[self.trade_partner.get(t, t)]

    def _allreduce(self, views: list) -> None:
        """A bucket summed across the ranks, in place (on the all-reduce stream)."""
        for view, total in zip(views, self.reduce([self.backend.read(v) for v in views])):
            self.backend.write(view, total)

    def issue(self) -> None:
        be, events = self.backend, {}
        for i, (ins, prep) in enumerate(zip(self.p.instrs, self.plan)):
            for d in ins.deps:
                if d in events and self.p.instrs[d].kind != ins.kind:
                    be.wait(ins.kind, events[d])
            if ins.kind == COMPUTE:
                node, ins_views, out_views = prep
                be.launch(COMPUTE, node, ins_views, out_views)
            elif ins.kind == SWAP_IN:
                be.copy_h2d(SWAP_IN, prep, self.host[ins.target])
            elif ins.kind == ALLREDUCE:
                be.host_call(ALLREDUCE, functools.partial(self._allreduce, prep))
            elif ins.copy:
                be.copy_d2h(SWAP_OUT, self.host[ins.target], prep)
            if i in self.signals:
                events[i] = be.record(ins.kind)
