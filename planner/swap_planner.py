"""The swap planner (SwapAdvisor Section 4.2): schedule + allocation -> Program.

The planner walks the schedule keeping track of which tensor sits in which object
of a size-class layout (``allocator.SizeClassLayout``). When an operator needs a tensor that
is not resident, or room for an output, it takes the free object of the tensor's class that
became free earliest (a copy into it can start soonest); if none is free it evicts a resident
tensor of that class: the one used furthest in the future (Belady), among those last used at
least a threshold ago (so there is time to swap it out before its object is needed). Leaves
whose host copy is current (parameters, inputs) stay resident after their last read until
evicted, which copies nothing (the paper's semantics). A swap-out copies to the host only
when the host copy is stale. With ``headroom``, after each operator the planner also evicts
ahead of need, keeping that fraction of each touched class free, so that the copy into an
evicted object starts right after the victim's last use instead of at the step that needs it.

Every instruction carries the edges that make it safe; a swap-in depends only on its object
being released and its host copy being written, so it runs as early as that allows
(prefetch), not when the compute stream reaches it. The planner keeps every edge until the
streams' order is final: with ``order_copies`` (and a profile) the copy streams are
reordered by urgency (``planner.stream_order``), so a swap-in waiting for its object no
longer holds those queued behind it; then edges within a stream are dropped as implied.

Double pass: the first pass starts with no state on the device; the state whose
next values end resident become the initial residents of the next pass, in the
objects where they ended. A resident whose next value does not end in its home
object is dropped from the set and the pass repeated, until a fixed point: the
Program then leaves the device as it found it and can run every iteration.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from allocator import SizeClassLayout
from engine.graph_io import fingerprint
from engine.inplace import in_place_input, in_place_pairs
from engine.ir import Graph, Kind, PERSISTENT_KINDS
from engine.profile import Profile
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT, Arena, Instr, Program

from .errors import PlanError
from .stream_order import order_copies, renumber


@dataclass(frozen=True)
class PlanOptions:
    victim: str = "belady"            # "belady" (SwapAdvisor) or "lru" (on-demand swapping)
    threshold_s: float | None = None  # recency threshold; None: the incoming tensor's transfer time
    max_passes: int = 16
    # Evict ahead of need: after each operator, keep this fraction of each size class's
    # objects free by evicting (Belady) tensors whose next use is far enough away that the
    # swap-out and the swap-in back both fit before it (``ahead_gap`` transfer times).
    headroom: float = 0.0
    ahead_gap: float = 2.0
    # Reorder the copy streams by urgency after planning (planner.stream_order); needs op
    # times and a link.
    order_copies: bool = False


class _Static:
    """Per-graph, per-schedule facts the scan reads: dense arrays by tensor id."""

    def __init__(self, g: Graph, schedule: Sequence[int], layout: SizeClassLayout,
                 op_seconds: np.ndarray | None, link_bytes_per_s: float | None, opts: PlanOptions):
        self.g, self.schedule, self.layout = g, list(schedule), layout
        n_t = len(g.tensors)
        self.nbytes = np.array([t.nbytes for t in g.tensors], dtype=np.int64)
        try:
            self.klass = layout.class_of_sizes(self.nbytes)
        except ValueError as e:
            raise PlanError(str(e)) from None
        reads: list[list[int]] = [[] for _ in range(n_t)]
        for pos, nid in enumerate(self.schedule):
            for t in dict.fromkeys(g.nodes[nid].inputs):
                reads[t].append(pos)
        self.reads = reads
        self.end = len(self.schedule)
        self.kept = set(nxt for _, nxt in g.state_pairs)       # must survive the iteration
        if g.loss is not None:
            self.kept.add(g.loss)
        # "Next use" once a tensor's reads are done: the end for kept tensors, else never.
        self.after_reads = np.full(n_t, self.end + 1, dtype=np.int64)
        self.after_reads[list(self.kept)] = self.end
        self.first_read = np.array([r[0] if r else self.after_reads[t] for t, r in enumerate(reads)],
                                   dtype=np.int64)
        secs = np.ones(len(g.nodes)) if op_seconds is None else np.asarray(op_seconds, dtype=float)
        step_secs = secs[self.schedule] if self.schedule else np.zeros(0)
        self.step_end = np.cumsum(step_secs)                    # finish time of each step, compute only
        # By next-use step: when that step starts; at the end (kept tensors); never.
        self.use_time = np.concatenate(([0.0], self.step_end, [np.inf]))
        self.link = link_bytes_per_s
        self.initial_host = set(g.leaves(Kind.INPUT, Kind.LABEL, *PERSISTENT_KINDS))
        # Most operators declare no in-place output: the scan asks the rule only for those that do.
        self.declares_inplace = [bool(in_place_pairs(n)) for n in g.nodes]
        # Leaves whose host copy is current stay resident after their last read until evicted
        # (the paper's semantics; evicting them copies nothing).
        self.stays = np.zeros(n_t, dtype=bool)
        self.stays[list(self.initial_host)] = True
        self.stays[list(self.kept)] = False
        counts = np.array([len(layout.objects_of_class(k)) for k in range(layout.num_classes)])
        self.ahead_gap = opts.ahead_gap
        self.object_class = layout.object_class.tolist()
        self.headroom = np.ceil(opts.headroom * counts).astype(np.int64) if opts.headroom > 0 else None


class _Scan:
    """One pass over the schedule for a given set of initially resident state."""

    def __init__(self, s: _Static, resident: dict[int, int], opts: PlanOptions):
        self.s, self.opts = s, opts
        lay = s.layout
        n_obj = len(lay.object_offset)
        self.tenant = np.full(n_obj, -1, dtype=np.int64)
        # Scalar per-tensor state is in Python lists: numpy scalar indexing is slow in this loop.
        self.obj_of = [-1] * len(s.g.tensors)
        # Free objects of each class, the earliest freed first: a copy into it can start soonest.
        self.free: list[deque[int]] = []
        taken = set(resident.values())
        for k in range(lay.num_classes):
            self.free.append(deque(o for o in lay.objects_of_class(k) if o not in taken))
        # Instructions that must finish before an object is written again, one per stream.
        self.release = [[-1, -1, -1] for _ in range(n_obj)]
        self.writer = [-1] * len(s.g.tensors)        # instr that made it resident
        self.host_writer: dict[int, int] = {t: -1 for t in s.initial_host if t not in resident}
        self.read_ptr = [0] * len(s.g.tensors)
        self.next_read = s.first_read.copy()       # step of each tensor's next read (see _Static)
        self.busy = np.zeros(len(s.g.tensors), dtype=bool)   # the current operator's tensors
        self.last_touch = np.full(len(s.g.tensors), -1, dtype=np.int64)  # step of last read or write
        self.instrs: list[Instr] = []
        for t, o in resident.items():
            self.tenant[o], self.obj_of[t] = t, o

    # ------------------------------------------------------------------ helpers
    def emit(self, ins: Instr) -> int:
        # Every edge, same-stream ones included, until the streams' order is final (plan()).
        ins.deps = sorted({d for d in ins.deps if d >= 0})
        self.instrs.append(ins)
        return len(self.instrs) - 1

    def advance_read(self, t: int) -> None:
        r = self.s.reads[t]
        p = self.read_ptr[t] + 1
        self.read_ptr[t] = p
        self.next_read[t] = r[p] if p < len(r) else self.s.after_reads[t]

    def place(self, t: int, o: int, writer: int) -> None:
        self.tenant[o], self.obj_of[t], self.writer[t] = t, o, writer

    def vacate(self, o: int) -> None:
        self.obj_of[self.tenant[o]] = -1
        self.tenant[o] = -1

    def free_object(self, o: int) -> None:
        self.free[self.s.object_class[o]].append(o)
        self.vacate(o)

    def acquire(self, t: int, pos: int, busy: set[int]) -> int:
        """A free object of t's class, evicting a resident tensor if none is free."""
        k = self.s.klass[t]
        if self.free[k]:
            return self.free[k].popleft()
        objects = self.s.layout.objects_of_class(k)
        cands = self.tenant[objects.start:objects.stop]
        cands = cands[cands >= 0]
        cands = cands[~self.busy[cands]]
        if not len(cands):
            node = self.s.g.nodes[self.s.schedule[pos]]
            need = sum(1 for x in busy if self.s.klass[x] == k)
            raise PlanError(f"operator '{node.name}' ({node.op}) needs {need} objects of size class {k} "
                            f"at once; the allocation has {len(objects)}")
        victim = self.choose_victim(cands, t, pos)
        return self.evict(victim)

    def evict(self, victim: int) -> int:
        """Take ``victim`` off the device (copying it out if its host copy is stale); its object."""
        o = self.obj_of[victim]
        if not self.host_current(victim):
            i = self.emit(Instr(SWAP_OUT, victim, o, copy=True, deps=[self.writer[victim]]))
            self.host_writer[victim] = i
            self.release[o][SWAP_OUT] = i
        self.vacate(o)
        return o

    def evict_ahead(self, pos: int, classes) -> None:
        """Keep each class's headroom free: evict, furthest next use first, tensors whose next
        use leaves time to swap them out and back (so a later copy into their object need
        not wait for the step that needs it)."""
        s = self.s
        now = s.step_end[pos]
        for k in classes:
            want = int(s.headroom[k]) - len(self.free[k])
            if want <= 0:
                continue
            objects = s.layout.objects_of_class(k)
            cands = self.tenant[objects.start:objects.stop]
            cands = cands[cands >= 0]
            if not len(cands):
                continue
            nxt = self.next_read[cands]
            best = np.argsort(-self.farness(cands, now), kind="stable")[:want]
            for t, r in zip(cands[best].tolist(), nxt[best].tolist()):
                if r == s.end:          # state's next value or the loss: leaves at the end
                    continue
                if r < s.end:
                    needed = s.use_time[r]
                    travel = s.nbytes[t] / s.link if s.link else 0.0
                    if needed - now < s.ahead_gap * travel or (not s.link and r - pos < 2):
                        break
                self.free[k].append(self.evict(t))

    def host_current(self, t: int) -> bool:
        return t in self.host_writer

    def choose_victim(self, cands: np.ndarray, incoming: int, pos: int) -> int:
        """Vectorised over the class's resident tensors; ties go to the lowest tensor id."""
        s = self.s
        touched = self.last_touch[cands]
        if self.opts.victim == "lru":
            return int(cands[touched == touched.min()].min())
        threshold = self.opts.threshold_s
        if threshold is None:
            threshold = s.nbytes[incoming] / s.link if s.link else 0.0
        now = s.step_end[pos - 1] if pos > 0 else 0.0
        idle = (touched < 0) | (now - s.step_end[np.maximum(touched, 0)] >= threshold)
        pool = cands[idle] if idle.any() else cands
        far = self.farness(pool, now)
        return int(pool[far == far.max()].min())

    def farness(self, cands: np.ndarray, now: float) -> np.ndarray:
        """How far away each candidate's next use is, in compute seconds (Belady's key)."""
        return self.s.use_time[self.next_read[cands]] - now

    # ------------------------------------------------------------------ the pass
    def run(self) -> None:
        s, g = self.s, self.s.g
        for pos, nid in enumerate(s.schedule):
            node = g.nodes[nid]
            busy = set(node.inputs) | set(node.outputs)
            self.busy[list(busy)] = True
            for t in dict.fromkeys(node.inputs):
                if self.obj_of[t] < 0:
                    self.swap_in(t, pos, busy)
            in_objs = [self.obj_of[t] for t in node.inputs]
            # Inputs read for the last time here, in input order; freed in reverse (a tie-break,
            # measured marginally better than input order on the Table 1 models).
            dying = [t for t in dict.fromkeys(node.inputs)
                     if self.read_ptr[t] + 1 >= len(s.reads[t]) and t not in s.kept]
            out_objs = []
            for k, t in enumerate(node.outputs):
                src = in_place_input(node, k, dying.__contains__) if s.declares_inplace[nid] else None
                if src is not None:
                    # An updated state takes over its old value's object (MXNet's in-place update).
                    dying.remove(node.inputs[src])
                    self.vacate(in_objs[src])
                    out_objs.append(in_objs[src])
                else:
                    out_objs.append(self.acquire(t, pos, busy))
            deps = [self.writer[t] for t in node.inputs]
            for o in out_objs:
                deps += self.release[o]
            i = self.emit(Instr(COMPUTE, nid, objects=tuple(in_objs + out_objs), deps=deps))
            for t in dict.fromkeys(node.inputs):
                self.advance_read(t)
                self.last_touch[t] = pos
                if self.obj_of[t] >= 0:
                    self.release[self.obj_of[t]][COMPUTE] = i
            for t, o in zip(node.outputs, out_objs):
                self.place(t, o, i)
                self.release[o] = [i, -1, -1]
                self.last_touch[t] = pos
            for t in reversed(dying):
                if not s.stays[t]:
                    self.free_object(self.obj_of[t])
            for t in node.outputs:
                if not s.reads[t] and t not in s.kept:
                    self.free_object(self.obj_of[t])
            self.busy[list(busy)] = False
            if s.headroom is not None:
                self.evict_ahead(pos, sorted({int(s.klass[t]) for t in busy}))

    def swap_in(self, t: int, pos: int, busy: set[int]) -> None:
        if t not in self.host_writer:
            node = self.s.g.nodes[self.s.schedule[pos]]
            raise PlanError(f"operator '{node.name}' reads '{self.s.g.tensors[t].name}', which is "
                            "neither resident nor on the host (planner bug)")
        self.copy_in(t, self.acquire(t, pos, busy))

    def copy_in(self, t: int, o: int) -> None:
        i = self.emit(Instr(SWAP_IN, t, o, deps=[self.host_writer[t], *self.release[o]]))
        self.place(t, o, i)
        self.release[o] = [-1, i, -1]

    def finish(self, resident: dict[int, int]) -> list[int]:
        """Write back state leaving the device; return resident state whose next value strayed."""
        g = self.s.g
        strayed = []
        for cur, nxt in g.state_pairs:
            home = resident.get(cur)
            if home is not None and self.obj_of[nxt] == home:
                continue
            if home is not None:
                strayed.append(cur)
            if not self.host_current(nxt):
                o = self.obj_of[nxt]
                i = self.emit(Instr(SWAP_OUT, nxt, o, copy=True, deps=[self.writer[nxt]]))
                self.host_writer[nxt] = i
        return strayed


def plan(g: Graph, schedule: Sequence[int], allocation, scratch_bytes: int, profile: Profile | None = None,
         node_seconds: np.ndarray | None = None, options: PlanOptions = PlanOptions(),
         policy: str = "swapadvisor") -> Program:
    """Inputs: the training graph, a topological order of its nodes, an allocation
    (sizes, cls, cnt: allocator.Allocation), the operator scratch to reserve at the arena's
    end (``GraphFacts.scratch`` or ``Budget.scratch_bytes``), the profile (optional; its op
    times, ``node_seconds`` if precomputed, and link set the recency threshold and how far
    ahead to evict, and order the copy streams).
    Output: a Program that runs one iteration within the allocation's objects plus scratch.
    Raises PlanError when the allocation cannot hold some operator's tensors."""
    layout = SizeClassLayout.from_allocation(allocation)
    if profile is not None and node_seconds is None:
        node_seconds = profile.node_seconds(g)
    link = profile.link.h2d_bytes_per_s if profile is not None else None
    s = _Static(g, schedule, layout, node_seconds, link, options)
    resident: dict[int, int] = {}
    first = True
    for _ in range(options.max_passes):
        scan = _Scan(s, resident, options)
        scan.run()
        strayed = scan.finish(resident)
        if first:
            # State whose next value ended on the device becomes resident, where it ended.
            first = False
            resident = {cur: int(scan.obj_of[nxt]) for cur, nxt in g.state_pairs if scan.obj_of[nxt] >= 0}
            if not resident:
                break
        elif strayed:
            for cur in strayed:
                del resident[cur]
        else:
            break
    else:
        raise PlanError(f"the double pass did not settle in {options.max_passes} passes")
    program = Program(g.name, list(schedule), Arena.of(layout, scratch_bytes), scan.instrs, dict(resident),
                      policy, fingerprint(g))
    if options.order_copies and profile is not None:
        return order_copies(program, g, profile, node_seconds)
    return renumber(program, range(len(program.instrs)))
