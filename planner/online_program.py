"""Programs whose tensors are placed by an online allocator, one request at a time.

The policies that walk a schedule and ask for memory as they go (``window``: paper 001's
schedule window; ``lms``: TFLMS) share this builder. Every stay of a tensor on the device is
a new object of the allocator (``allocator.online``): ``place`` asks for one, ``drop`` gives it
back, and the instructions are emitted in the order the policy decides them, which is a valid
sequential execution.

Edges (what the verifier demands, nothing more):
- a compute depends on the instruction that put each input where it is (its writer); an output
  written in place over an input's object also waits for that object's swap-out, if any;
- a swap-in depends on the swap-out that wrote its host copy (none for a host copy given at
  the start); a swap-out depends on its tensor's writer;
- the first write into an object waits for every earlier object that shares bytes with it
  (physical bytes, from ``Arena.physical_pieces``; ``reuse_edges_by_bytes``) to be
  done with: per stream, the last instruction that touched any of them. Objects sharing bytes
  are never live at once, so "earlier" is allocation order, and these edges are added once the
  arena is known (``program``), which is also what lets a swap-in start as soon as the bytes it
  reuses are free rather than when the compute stream reaches it.

Persistent state either round-trips through the host every iteration (no initial residents)
or, with ``resident``, starts in objects placed before anything else; a resident whose next
value does not end in its home object is reported (``strayed``) so the caller can plan again
without it, as the swap planner's double pass does.
"""
from __future__ import annotations

from functools import cached_property
from typing import Iterable, Sequence

import numpy as np

from engine.collector import collector_held
from engine.graph_io import fingerprint
from engine.inplace import InPlace
from engine.ir import Graph
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT, Arena, Instr, Program
from engine.units import format_bytes

from .errors import OutOfRoom, PlanError
from .reuse_edges import reuse_edges_by_bytes
from .swap_planner import GraphArrays


class StateStrayed(PlanError):
    """A pass made with ``give_up_on_stray`` freed a resident state's home object: some state
    strays, and the pass stopped there."""


INITIAL_HOST = -1    # host_writer: the host copy was given at the start
NOT_HOST = -2        # host_writer: the host copy is stale (or there is none)
NEVER = np.iinfo(np.int64).max


class StepFacts:
    """Per step of a schedule: the node, its distinct inputs, its outputs, which output takes
    which input's object in place, and per tensor the steps that use it (reads and its
    production). Shared by the online policies; computed once per (graph, schedule)."""

    def __init__(self, g: Graph, schedule: Sequence[int]):
        self.schedule = [int(n) for n in schedule]
        ga = GraphArrays.of(g)
        self.kept = ga.kept
        n_t = len(g.tensors)
        uses: list[list[int]] = [[] for _ in range(n_t)]
        self.inputs: list[list[int]] = []
        self.outputs: list[list[int]] = []
        for pos, nid in enumerate(self.schedule):
            node = g.nodes[nid]
            ins = list(dict.fromkeys(node.inputs))
            self.inputs.append(ins)
            self.outputs.append(list(node.outputs))
            for t in ins:
                uses[t].append(pos)
            for t in node.outputs:
                uses[t].append(pos)
        self.uses = uses
        last = np.array([u[-1] if u else -1 for u in uses], dtype=np.int64)
        self.last_use = last
        # Output k of step pos takes the object of input in_place[pos][k] (a tensor id) or -1,
        # as the in-place rule decides in this order (a written-over input is read last there,
        # so its last use is its last read).
        position = np.full(len(g.nodes), -2, dtype=np.int64)
        position[self.schedule] = np.arange(len(self.schedule))
        source = InPlace.of(g).sources(n_t, position, last, self.kept)
        self.in_place: list[list[int]] = [[int(source[t]) for t in outs] for outs in self.outputs]

    @cached_property
    def produced_at(self) -> dict[int, int]:
        """Per tensor made in the schedule: the step that produces it."""
        return {t: pos for pos, outs in enumerate(self.outputs) for t in outs}

    def dies_at(self, t: int, pos: int) -> bool:
        """Whether ``t`` is not needed after step ``pos`` (its last use, and not kept)."""
        return int(self.last_use[t]) == pos and not self.kept[t]


class OnlineProgram:
    """Instructions, objects and residency of one pass; ``program()`` makes the Program."""

    def __init__(self, g: Graph, allocator, scratch_bytes: int, schedule: Sequence[int], policy: str,
                 resident: Iterable[int] = (), give_up_on_stray: bool = False):
        ga = GraphArrays.of(g)
        self.g, self.alloc, self.scratch_bytes, self.policy = g, allocator, int(scratch_bytes), policy
        self.schedule = [int(n) for n in schedule]
        self.nbytes = ga.nbytes.tolist()
        n_t = len(g.tensors)
        self.obj_of = [-1] * n_t
        self.writer = [-1] * n_t                  # the instruction that made it resident (-1: initial)
        self.host_writer = [INITIAL_HOST if h else NOT_HOST for h in ga.host_at_start.tolist()]
        self.instrs: list[Instr] = []
        self.touch: list[list[int]] = []          # per object: last instruction per stream that used it
        self.first_write: list[int] = []          # per object: the instruction that first wrote it
        self.initial_resident: dict[int, int] = {}
        self.on_device: set[int] = set()
        self.copies_out = self.copies_in = 0
        for t in sorted(resident):
            o = self.place(t)
            if o is None:
                raise OutOfRoom(f"{policy}: the resident state does not fit the budget "
                                f"({format_bytes(self.nbytes[t])} for '{g.tensors[t].name}' finds no room)")
            self.initial_resident[t] = o
            self.obj_of[t] = o
            self.host_writer[t] = NOT_HOST
            self.on_device.add(t)
        self.home_of_next = {nxt: self.initial_resident[cur] for cur, nxt in g.state_pairs
                             if cur in self.initial_resident}
        # With give_up_on_stray, freeing a home object raises StateStrayed: object ids are never
        # reused, so that state's next value can no longer end at home (``leave_state``). For a
        # caller that only wants a pass in which none strays.
        self._home_objects = frozenset(self.initial_resident.values()) if give_up_on_stray else frozenset()

    def at_home(self, t: int) -> bool:
        """Whether ``t`` is a resident state's next value sitting in that state's home object
        (where the next iteration expects it: it needs no host copy)."""
        home = self.home_of_next.get(t)
        return home is not None and self.obj_of[t] == home

    # ------------------------------------------------------------------ memory
    def place(self, t: int) -> int | None:
        """A new object for ``t``'s bytes, or None if the allocator has no room now."""
        o = self.alloc.alloc(self.nbytes[t])
        if o is not None:
            while len(self.touch) <= o:
                self.touch.append([-1, -1, -1])
                self.first_write.append(-1)
        return o

    def drop(self, t: int) -> None:
        """``t`` leaves the device (dead, or its host copy is current): its object is freed."""
        o = self.obj_of[t]
        if o in self._home_objects:
            raise StateStrayed(f"{self.policy}: '{self.g.tensors[t].name}' leaves a resident state's home object")
        self.alloc.free(o)
        self.obj_of[t] = -1
        self.on_device.discard(t)

    # ------------------------------------------------------------------ instructions
    def _emit(self, kind: int, target: int, obj: int, deps, objects=(), copy=True, recompute=False) -> int:
        i = len(self.instrs)
        self.instrs.append(Instr(kind, target, obj, tuple(objects), copy, sorted({d for d in deps if d >= 0}),
                                 recompute))
        return i

    def _touched(self, o: int, i: int, stream: int) -> None:
        self.touch[o][stream] = i
        if self.first_write[o] < 0 and stream != SWAP_OUT:
            self.first_write[o] = i

    def swap_in(self, t: int, o: int, after: int = -1) -> None:
        """Copy ``t``'s host copy into new object ``o`` (not before instruction ``after``, if any:
        a policy whose swap-ins are triggered by an operator finishing)."""
        i = self._emit(SWAP_IN, t, o, [self.host_writer[t], after])
        self._touched(o, i, SWAP_IN)
        self.writer[t], self.obj_of[t] = i, o
        self.on_device.add(t)
        self.copies_in += 1

    def write_back(self, t: int) -> None:
        """Make ``t``'s host copy current (a swap-out that copies) unless it already is;
        ``t`` stays resident until dropped."""
        if self.host_writer[t] != NOT_HOST:
            return
        o = self.obj_of[t]
        i = self._emit(SWAP_OUT, t, o, [self.writer[t]])
        self._touched(o, i, SWAP_OUT)
        self.host_writer[t] = i
        self.copies_out += 1

    def compute(self, pos: int, nid: int, out_objs: Sequence[int], recompute: bool = False) -> None:
        """Run step ``pos`` (node ``nid``): inputs where they are, outputs in ``out_objs`` (an
        input's object for an output written over it in place: that input is then gone).
        ``recompute``: the node run again after its step, to recreate outputs a plan dropped."""
        node = self.g.nodes[nid]
        in_objs = [self.obj_of[t] for t in node.inputs]
        deps = [self.writer[t] for t in node.inputs]
        for o in out_objs:
            if o in in_objs:          # in place: after the input's swap-out, if it has one
                deps.append(self.touch[o][SWAP_OUT])
        i = self._emit(COMPUTE, nid, -1, deps, [*in_objs, *out_objs], recompute=recompute)
        for o in in_objs:
            self._touched(o, i, COMPUTE)
        for t, o in zip(node.outputs, out_objs):
            self._touched(o, i, COMPUTE)
            if o in in_objs:          # the input whose object it took is gone
                src = node.inputs[in_objs.index(o)]
                self.obj_of[src] = -1
                self.on_device.discard(src)
            self.obj_of[t], self.writer[t], self.host_writer[t] = o, i, NOT_HOST
            self.on_device.add(t)

    # ------------------------------------------------------------------ the end
    def leave_state(self) -> list[int]:
        """Persistent state leaves the iteration: a next value back in its resident's home
        object stays; every other next value is written to the host. Returns the resident
        current values whose next value strayed from home."""
        strayed = []
        for cur, nxt in self.g.state_pairs:
            home = self.initial_resident.get(cur)
            if home is not None and self.obj_of[nxt] == home:
                continue
            if home is not None:
                strayed.append(cur)
            if self.host_writer[nxt] == NOT_HOST:
                if self.obj_of[nxt] < 0:
                    raise PlanError(f"{self.policy}: '{self.g.tensors[nxt].name}' left the device without "
                                    "a host copy (planner bug)")
                self.write_back(nxt)
        return strayed

    def program(self) -> Program:
        """The Program: the arena of the allocator's layout, and each object's first write
        ordered after everything that used the bytes it reuses (``reuse_edges_by_bytes``)."""
        arena = Arena.of(self.alloc.layout(), self.scratch_bytes)
        for first, extra in reuse_edges_by_bytes(arena, self.first_write, self.touch):
            if max(extra) >= first:
                raise PlanError(f"{self.policy}: instruction {first} reuses bytes still in use (planner bug)")
            ins = self.instrs[first]
            ins.deps = sorted(set(ins.deps) | set(extra))
        return Program(self.g.name, list(self.schedule), arena, self.instrs, dict(self.initial_resident),
                       self.policy, fingerprint(self.g))


def settle(one_pass, state: Iterable[int], policy: str, max_passes: int = 8) -> Program:
    """The double pass: plan with ``state`` resident (``one_pass(resident) -> OnlineProgram``
    after ``leave_state``'s check), dropping the residents whose next value strayed from home,
    until none strays; the Program of that pass."""
    with collector_held():
        return _settled(one_pass, set(state), policy, max_passes)


def _settled(one_pass, resident: set, policy: str, max_passes: int) -> Program:
    for _ in range(max_passes):
        out, strayed = one_pass(resident)
        if not strayed:
            return out.program()
        resident -= set(strayed)
    if resident:
        out, strayed = one_pass(set())
        if not strayed:
            return out.program()
    raise PlanError(f"{policy}: the resident state did not settle in {max_passes} passes")


def persistent_state(g: Graph) -> list[int]:
    """The current values of parameters and optimizer state: the candidates to stay resident."""
    return [cur for cur, _ in g.state_pairs]


def online_allocator(request, **preferred):
    """The request's online allocator over the budget's pool (None: the first registered online
    allocator, every online policy's default); ``preferred``: the policy's own parameters for it,
    where the allocator takes them and the request does not set them."""
    from allocator.online import make_online_allocator, takes_option

    name = online_allocator_name(request)
    params = {k: v for k, v in preferred.items() if takes_option(name, k)}
    return make_online_allocator(name, request.budget.pool_bytes, **{**params, **dict(request.allocator_options)})


def online_allocator_name(request) -> str:
    """The online allocator ``online_allocator`` makes for the request."""
    from allocator import registry
    return request.allocator or registry.of_kind(registry.ONLINE)[0]


def policy_sets(request, option: str) -> bool:
    """Whether a policy's preferred ``option`` reaches the request's online allocator: it takes
    that option and the request does not set it."""
    from allocator.online import takes_option
    return takes_option(online_allocator_name(request), option) and option not in dict(request.allocator_options)


def fastest(request, candidates, plan_one, refusal: type[Exception]):
    """The fastest on the simulator of ``plan_one(candidate) -> (Program, info)`` over
    ``candidates`` (a policy's one-dimensional tuning), as ``((Program, seconds, info) or None,
    the refusals raised, in order)``; only ``refusal`` exceptions are caught."""
    from .simulate import simulate

    best, refused = None, []
    for candidate in candidates:
        with collector_held():
            try:
                program, info = plan_one(candidate)
            except refusal as e:
                refused.append(e)
                continue
            t = simulate(program, request.graph, request.profile, request.op_seconds).total
        if best is None or t < best[1]:
            best = (program, t, info)
    return best, refused
