"""Static proof that a Program is safe under every interleaving its edges allow.

Happens-before is stream order plus dependency edges. With three in-order
streams, vector clocks of length 3 decide it exactly: a happens before b iff
b's clock has seen a's position in a's stream.

Checked, naming the first violation:
- the arena: objects inside it, before its scratch region; scratch for the most
  demanding operator; the arena (scratch included) within the budget;
- every read (a compute input, a swap-out) finds the tensor in its object, and
  the write that put it there happens before the read;
- every write into an object happens after all reads and the write of the
  object's previous tenant, and of the tenants of every object sharing bytes
  with it (no two live tensors share a byte); the write evicts those tenants.
  Bytes are PHYSICAL bytes: with a page table (virtual addressing), objects whose
  virtual ranges differ share bytes when their ranges map to one physical chunk;
- every swap-in reads a host copy that a swap-out wrote before it, or the
  initial host copy (inputs, labels, state not resident at the start or that
  nothing updates);
- a recomputation (a compute with ``recompute`` set) runs a node that the schedule already ran
  and whose operator allows it (``engine.recompute.recomputable``: no state outputs, no
  randomness); it reads and writes like any compute, so its inputs must be resident and hold
  the very tensors the node first read (tensors are values: a later version, an in-place or
  updated one, is another tensor), and its outputs land where no live tensor is overwritten
  before its last read;
- at the end, each resident state's next value sits in its home object and
  every other next value has been written to the host; the loss and outputs are readable;
- a plan for N > 1 data-parallel ranks (``Program.ranks``) all-reduces every gradient an
  optimizer's step reads (``planner.allreduce.reduced_gradients``) exactly once, on the fourth
  stream: an ALLREDUCE reads and writes each tensor of its bucket in its object, so the write that
  made the gradient happens before it, and no other instruction reads or writes those bytes
  while it runs (the ordinary read and write rules); and the update, or a swap-out, reads the
  reduced value, never the rank's own (a flag per object and per host copy says which it holds).
  A plan for one rank holds no all-reduce.
"""
from __future__ import annotations

import numpy as np

from engine.collector import collector_held
from engine.graph_check import check_order
from engine.inplace import in_place_input
from engine.recompute import recomputable
from engine.ir import Graph, Kind, PERSISTENT_KINDS
from engine.physical_bytes import PhysicalBytes
from engine.program import ALLREDUCE, ALL_STREAMS, COMPUTE, SWAP_IN, SWAP_OUT, Program

from .allreduce import reduced_gradients
from .facts import operator_scratch
from engine.errors import EngineError

INITIAL = -1   # pseudo-instruction: state present before the iteration starts


class VerificationError(EngineError, ValueError):
    pass


def verify(program: Program, graph: Graph, device_bytes: int | None = None) -> None:
    """Inputs: a Program, the Graph it was planned for, the device budget in bytes
    (``Budget.device_bytes``; None: unlimited). Output: None, or VerificationError naming
    the first violation."""
    _check_ids(program, graph)
    _check_arena(program, graph, device_bytes)
    # The checker's per-object lists and sets are no cycles, but their allocations trigger the
    # cyclic collector, whose full passes grow with everything the process holds: on NasNet-16's
    # window plan 25.5 us an instruction against 18.2 with it held (16.8 on NasNet-2 either way).
    with collector_held():
        _Checker(program, graph).run()


def _check_ids(program: Program, graph: Graph) -> None:
    """Every id a Program names exists (a loaded plan may name anything): node ids in the
    schedule and compute instructions, tensor ids in swaps and the initial residents."""
    n_nodes, n_tensors = len(graph.nodes), len(graph.tensors)
    bad_node = next((n for n in program.schedule if not 0 <= n < n_nodes), None)
    if bad_node is not None:
        raise VerificationError(f"the schedule names node {bad_node}; the graph has nodes 0 to {n_nodes - 1}")
    for i, ins in enumerate(program.instrs):
        if ins.kind not in ALL_STREAMS:
            raise VerificationError(f"instruction {i} has unknown kind {ins.kind}")
        limit, what = (n_nodes, "node") if ins.kind == COMPUTE else (n_tensors, "tensor")
        if not 0 <= ins.target < limit:
            raise VerificationError(f"instruction {i} names {what} {ins.target}; the graph has {what}s 0 to "
                                    f"{limit - 1}")
        if ins.kind == ALLREDUCE:
            if not ins.bucket or ins.bucket[0] != ins.target or len(ins.objects) != len(ins.bucket):
                raise VerificationError(f"instruction {i} (allreduce) must name its bucket's tensors, the first as "
                                        "its target, and one object for each")
            bad = next((t for t in ins.bucket if not 0 <= t < n_tensors), None)
            if bad is not None:
                raise VerificationError(f"instruction {i} reduces tensor {bad}; the graph has tensors 0 to "
                                        f"{n_tensors - 1}")
    if program.ranks < 1:
        raise VerificationError(f"the plan is for {program.ranks} ranks; it must be for at least 1")
    bad_tensor = next((t for t in program.initial_resident if not 0 <= t < n_tensors), None)
    if bad_tensor is not None:
        raise VerificationError(f"the initial residents name tensor {bad_tensor}; the graph has tensors 0 to "
                                f"{n_tensors - 1}")


def _check_arena(program: Program, graph: Graph, budget: int | None) -> None:
    p = program.arena
    if budget is not None and p.arena_bytes > budget:
        raise VerificationError(f"the arena needs {p.arena_bytes} bytes, over the budget of {budget}")
    scratch = operator_scratch(graph)
    need, nid = scratch.bytes, scratch.node
    if not 0 <= p.scratch_bytes <= p.arena_bytes:
        raise VerificationError(f"the arena of {p.arena_bytes} bytes cannot hold "
                                f"{p.scratch_bytes} bytes of scratch")
    if p.scratch_bytes < need:
        raise VerificationError(f"the arena reserves {p.scratch_bytes} bytes of operator scratch but "
                                f"'{graph.nodes[nid].name}' ({graph.nodes[nid].op}) needs {need}")
    if p.virtual:
        _check_page_table(p)
    elif len(p.object_offset) and (p.object_offset.min() < 0 or p.object_bytes.min() < 0
                                   or _ends_past(p.object_offset, p.object_bytes, p.scratch_offset)):
        raise VerificationError("an arena object lies outside the arena or in its scratch region")


def _ends_past(start: np.ndarray, size: np.ndarray, limit: int) -> bool:
    """Whether some non-negative range (start, size) ends past ``limit``, decided without
    forming start + size, which wraps past 2**63 in int64 (a wrapped end looks inside)."""
    return bool(np.any(start > int(limit) - size))


def _check_page_table(p) -> None:
    """Rows inside physical memory before scratch and inside the virtual space, no virtual byte
    mapped twice, every object's virtual range mapped, no object holding a physical byte twice."""
    rows = p.mappings
    if rows.ndim != 2 or rows.shape[1] != 3:
        raise VerificationError("the arena's page table must be rows of (virtual, physical, bytes)")
    v, ph, n = rows[:, 0], rows[:, 1], rows[:, 2]
    if len(rows) and (n.min() <= 0 or v.min() < 0 or ph.min() < 0 or _ends_past(ph, n, p.scratch_offset)
                      or _ends_past(v, n, p.virtual_bytes)):
        raise VerificationError("a page-table row maps bytes outside physical memory (or into its scratch) "
                                "or outside the virtual address space")
    order = np.argsort(v, kind="stable")
    if np.any(n[order][:-1] > np.diff(v[order])):          # each row ends past the next one's start
        raise VerificationError("two page-table rows map one virtual byte")
    if len(p.object_offset) and (p.object_offset.min() < 0 or p.object_bytes.min() < 0):
        raise VerificationError("an arena object has a negative offset or size")
    try:
        ptr, start, size = p.physical_pieces()
    except ValueError as e:
        raise VerificationError(f"the arena's page table leaves {e}") from None
    owner = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))
    order = np.lexsort((start, owner))          # each object's pieces by physical offset
    owner, start, size = owner[order], start[order], size[order]
    twice = (owner[:-1] == owner[1:]) & (start[:-1] + size[:-1] > start[1:])
    if np.any(twice):
        raise VerificationError(f"object {int(owner[:-1][twice][0])}'s virtual range maps one physical byte twice")


class _Checker:
    def __init__(self, program: Program, graph: Graph):
        self.p, self.g = program, graph
        n_obj = program.arena.num_objects
        self.bytes = PhysicalBytes(program.arena)   # who last wrote each physical byte; who shares one
        self.tenant = np.full(n_obj, -1, dtype=np.int64)
        self.writer = np.full(n_obj, INITIAL, dtype=np.int64)
        self.readers: list[list[int]] = [[] for _ in range(n_obj)]
        # per object and stream, the stream position of its last reader since its write: every
        # reader in a stream happens before i iff that stream's last one does (stream order)
        self.last_read: list[list[int]] = [[-1] * len(ALL_STREAMS) for _ in range(n_obj)]
        self.clock: list[tuple[int, int, int]] = []
        self.stream_pos: list[int] = []
        self.host: dict[int, int] = {}   # tensor -> instruction that wrote its host copy (INITIAL: given)
        # data-parallel: the gradients to all-reduce (none for one rank), and which values are reduced
        self.gradients = reduced_gradients(graph) if program.ranks > 1 else {}
        self.reduced_by: dict[int, int] = {}           # gradient -> the all-reduce that summed it
        self.reduced_in = np.zeros(n_obj, dtype=np.bool_)   # the object's tenant is a reduced value
        self.reduced_host: set[int] = set()            # tensors whose host copy is the reduced value

    def fail(self, msg: str):
        raise VerificationError(msg)

    def name(self, t: int) -> str:
        return self.g.tensors[t].name

    def instr(self, i: int) -> str:
        return "the initial state" if i == INITIAL else self.p.describe(self.g, i)

    def happens_before(self, a: int, b: int) -> bool:
        if a == INITIAL or a == b:
            return True
        return self.clock[b][self.p.instrs[a].kind] > self.stream_pos[a]

    # ------------------------------------------------------------------ events
    def check_object(self, t: int, o: int, i: int) -> None:
        arena = self.p.arena
        if not 0 <= o < arena.num_objects:
            self.fail(f"{self.instr(i)} places '{self.name(t)}' in object {o}, which does not exist")
        size = self.g.tensors[t].nbytes
        if size > arena.object_bytes[o]:
            self.fail(f"{self.instr(i)} places '{self.name(t)}' ({size} bytes) in object {o} "
                      f"of {arena.object_bytes[o]} bytes")

    def read(self, t: int, o: int, i: int) -> None:
        self.check_object(t, o, i)
        if self.tenant[o] != t:
            holder = f"'{self.name(self.tenant[o])}'" if self.tenant[o] >= 0 else "nothing"
            self.fail(f"{self.instr(i)} reads '{self.name(t)}' from object {o}, which holds {holder} "
                      f"(written by {self.instr(self.writer[o])}): two live tensors in one object, "
                      "or a read of a tensor that is not resident")
        if not self.happens_before(self.writer[o], i):
            self.fail(f"{self.instr(i)} may read '{self.name(t)}' from object {o} before "
                      f"{self.instr(self.writer[o])} finishes writing it: no edge orders them")
        self.readers[o].append(i)
        self.last_read[o][self.p.instrs[i].kind] = self.stream_pos[i]

    def write(self, t: int, o: int, i: int) -> None:
        """The write must follow every access to each byte it covers since that byte's last write:
        the accesses of the objects whose writes last covered its bytes (``PhysicalBytes.owners``;
        an earlier tenant of a byte was overwritten by a write that followed its accesses, so
        checking the last one suffices, happens-before being transitive)."""
        self.check_object(t, o, i)
        owners = self.bytes.take(o)     # o owns its bytes from here (a failure ends the check anyway)
        owners.add(o)
        if not all(self.settled(x, i) for x in owners):
            self.overwrite_failure(o, i)
        for x in owners:
            if x != o:          # the write clobbers whatever lived in the bytes it shares; x keeps
                self.tenant[x] = -1     # its own accesses: x's bytes that o does not share are not
                                        # written here, so a later write into them need not follow i
        self.tenant[o], self.writer[o], self.readers[o] = t, i, []
        self.last_read[o] = [-1] * len(ALL_STREAMS)

    def settled(self, x: int, i: int) -> bool:
        """Whether object x's last write and every read since happen before instruction i (or are i)."""
        w = int(self.writer[x])
        if w != i and not self.happens_before(w, i):
            return False
        clock, kind = self.clock[i], self.p.instrs[i].kind
        # a reader in i's own stream precedes i there (or is i); the other streams' last readers decide
        return all(s == kind or last < clock[s] for s, last in enumerate(self.last_read[x]))

    def overwrite_failure(self, o: int, i: int) -> None:
        """Name the first access a write into o may race, objects in id order and each object's
        accesses in program order (the objects sharing bytes with o listed only now, on failure)."""
        for x in [o, *self.bytes.sharing(o)]:
            prev = self.tenant[x]
            for r in [self.writer[x], *self.readers[x]]:
                if r != i and not self.happens_before(r, i):
                    where = f"object {o}" if x == o else f"object {o}, which shares bytes with object {x},"
                    self.fail(f"{self.instr(i)} may overwrite {where} while {self.instr(r)} still uses "
                              f"{repr(self.name(prev)) if prev >= 0 else 'its bytes'} there: no edge orders them")
        self.fail(f"{self.instr(i)} may overwrite object {o} while an earlier access to its bytes is unordered "
                  "with it")   # not reached: the objects above hold every access settled() checks

    # ------------------------------------------------------------------ scan
    def run(self) -> None:
        p, g = self.p, self.g
        try:
            check_order(g, p.schedule)
        except ValueError as e:
            self.fail(f"the program's schedule is not a topological order: {e}")
        for t in g.leaves(Kind.INPUT, Kind.LABEL):
            self.host[t] = INITIAL
        unchanged = {cur for cur, nxt in g.state_pairs if cur == nxt}   # nothing updates them
        for t in g.leaves(*PERSISTENT_KINDS):
            if t not in p.initial_resident or t in unchanged:
                self.host[t] = INITIAL
        for t, o in p.initial_resident.items():
            if g.tensors[t].kind not in PERSISTENT_KINDS or g.producer[t] != -1:
                self.fail(f"'{self.name(t)}' is resident at the start but is not a parameter or state")
            self.check_object(t, o, INITIAL)
            # the residents placed so far own their bytes: one sharing a byte with o is an owner of it
            live = [o] if self.tenant[o] != -1 else sorted(x for x in self.bytes.owners(o) if self.tenant[x] != -1)
            if live:
                x = live[0]
                self.fail(f"'{self.name(t)}' and '{self.name(self.tenant[x])}' both start in object {o}"
                          + ("" if x == o else f" (which shares bytes with object {x})"))
            self.tenant[o] = t
            self.bytes.take(o)
        last_in_stream = [-1] * 4
        counts = [0] * 4
        next_compute = 0
        ran: set[int] = set()      # nodes whose step in the schedule has run
        for i, ins in enumerate(p.instrs):
            clock = list(self.clock[last_in_stream[ins.kind]]) if last_in_stream[ins.kind] >= 0 else [0] * 4
            for d in ins.deps:
                if not 0 <= d < i:
                    self.fail(f"{self.instr(i)} depends on instruction {d}, which does not precede it")
                clock = [max(a, b) for a, b in zip(clock, self.clock[d])]
            counts[ins.kind] += 1
            clock[ins.kind] = counts[ins.kind]
            self.clock.append(tuple(clock))
            self.stream_pos.append(counts[ins.kind] - 1)
            last_in_stream[ins.kind] = i
            if ins.kind == COMPUTE and ins.recompute:
                node = g.nodes[ins.target]
                if not recomputable(node):
                    self.fail(f"{self.instr(i)} runs '{node.name}' ({node.op}) again, but its outputs do not "
                              "depend on its inputs alone (state outputs or randomness): it cannot be recomputed")
                if ins.target not in ran:
                    self.fail(f"{self.instr(i)} recomputes '{node.name}' before the schedule runs it")
                self.compute(ins, i)
            elif ins.kind == COMPUTE:
                if next_compute >= len(p.schedule) or p.schedule[next_compute] != ins.target:
                    self.fail(f"{self.instr(i)} is out of the schedule's order")
                next_compute += 1
                ran.add(ins.target)
                self.compute(ins, i)
            elif ins.kind == SWAP_OUT:
                self.read(ins.target, ins.obj, i)
                if ins.copy:
                    self.host[ins.target] = i
                    if self.reduced_in[ins.obj]:
                        self.reduced_host.add(ins.target)
                    else:
                        self.reduced_host.discard(ins.target)
                elif ins.target not in self.host:
                    self.fail(f"{self.instr(i)} drops '{self.name(ins.target)}' without copying it, "
                              "but its host copy is not current: its value would be lost")
            elif ins.kind == SWAP_IN:
                src = self.host.get(ins.target)
                if src is None:
                    self.fail(f"{self.instr(i)} reads a host copy of '{self.name(ins.target)}' "
                              "that no earlier swap-out wrote")
                if not self.happens_before(src, i):
                    self.fail(f"{self.instr(i)} may start before {self.instr(src)} has written the host "
                              f"copy of '{self.name(ins.target)}': no edge orders them")
                self.write(ins.target, ins.obj, i)
                self.reduced_in[ins.obj] = ins.target in self.reduced_host
            elif ins.kind == ALLREDUCE:
                self.allreduce(ins, i)
            else:
                self.fail(f"instruction {i} has unknown kind {ins.kind}")
        if next_compute != len(p.schedule):
            self.fail(f"the program runs {next_compute} of the schedule's {len(p.schedule)} nodes")
        missing = next((t for t in self.gradients if t not in self.reduced_by), None)
        if missing is not None:
            self.fail(f"the plan for {p.ranks} ranks never all-reduces gradient '{self.name(missing)}': each rank "
                      "would update with its own")
        self.check_end()

    def allreduce(self, ins, i: int) -> None:
        if self.p.ranks == 1:
            self.fail(f"{self.instr(i)} all-reduces in a plan for one rank, which has nothing to reduce with")
        for t, o in zip(ins.bucket, ins.objects):
            if t not in self.gradients:
                self.fail(f"{self.instr(i)} all-reduces '{self.name(t)}', which no optimizer's step reads as "
                          "its gradient")
            if t in self.reduced_by:
                self.fail(f"{self.instr(i)} all-reduces '{self.name(t)}' again ({self.instr(self.reduced_by[t])} "
                          "already summed it across the ranks)")
            self.read(t, o, i)          # made before the reduction starts ...
            self.write(t, o, i)         # ... and nothing reads or writes its bytes until it ends
            self.reduced_by[t] = i
            self.reduced_in[o] = True

    def compute(self, ins, i: int) -> None:
        node = self.g.nodes[ins.target]
        if len(ins.objects) != len(node.inputs) + len(node.outputs):
            self.fail(f"{self.instr(i)} gives {len(ins.objects)} objects for "
                      f"{len(node.inputs)} inputs and {len(node.outputs)} outputs")
        in_objs = ins.objects[:len(node.inputs)]
        for t, o in zip(node.inputs, in_objs):
            self.read(t, o, i)
            if t in self.gradients and not self.reduced_in[o]:
                self.fail(f"{self.instr(i)} reads gradient '{self.name(t)}' before it is all-reduced across the "
                          f"{self.p.ranks} ranks: the update would use this rank's gradient alone")
        out_objs = ins.objects[len(node.inputs):]
        for k, (t, o) in enumerate(zip(node.outputs, out_objs)):
            clash = [m for m, eo in enumerate(out_objs[:k]) if eo == o or self.bytes.shares(eo, o)]
            if clash:   # one kernel writes both: neither would survive the other
                self.fail(f"{self.instr(i)} writes outputs '{self.name(node.outputs[clash[0]])}' and "
                          f"'{self.name(t)}' into the same bytes (objects {out_objs[clash[0]]} and {o})")
            shared = [j for j, io in enumerate(in_objs) if io == o]
            if shared and in_place_input(node, k) not in shared:
                self.fail(f"{self.instr(i)} writes output '{self.name(t)}' over its input "
                          f"'{self.name(node.inputs[shared[0]])}' in object {o}, which the operator "
                          "does not allow")
            apart = [j for j, io in enumerate(in_objs) if io != o and self.bytes.shares(io, o)]
            if apart:   # in place means the very same object; partly shared bytes never are
                j = apart[0]
                self.fail(f"{self.instr(i)} writes output '{self.name(t)}' into object {o}, which shares "
                          f"bytes with object {in_objs[j]} holding its input '{self.name(node.inputs[j])}'")
            self.write(t, o, i)
            self.reduced_in[o] = False

    def check_end(self) -> None:
        p, g = self.p, self.g
        for cur, nxt in g.state_pairs:
            home = p.initial_resident.get(cur)
            if home is not None:
                if self.tenant[home] != nxt:
                    self.fail(f"at the end, object {home} should hold '{self.name(nxt)}' (the next value of "
                              f"resident '{self.name(cur)}') but holds "
                              f"'{self.name(self.tenant[home]) if self.tenant[home] >= 0 else 'nothing'}'")
            elif nxt not in self.host:
                self.fail(f"'{self.name(nxt)}' is neither kept resident nor written to the host: "
                          "the next iteration would lose it")
        for t in g.read_back():
            if t not in self.host and t not in set(self.tenant.tolist()):
                self.fail(f"'{self.name(t)}', read back after the iteration, is not readable at the end")
