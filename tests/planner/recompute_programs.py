"""Programs with recomputations made by hand from real graphs' unlimited Programs, for the
verifier's, simulator's, trace's and report's tests (the planner does not emit them yet).

The recipe: a reader of a node's output, late in the Program, reads a copy the node's
recomputation writes just before it into new arena objects, instead of the copy its step
wrote. The new objects are poisoned by the sanitizer before the recomputation writes them,
so a run whose recomputation did not happen (or read wrong inputs) reads garbage.
"""
from __future__ import annotations

import copy

import numpy as np

from allocator import aligned_bytes
from engine.program import COMPUTE, SWAP_IN, Instr, Program, sharing_objects
from engine.recompute import recomputable
from zoo import small


def residents(program: Program, g, upto: int) -> dict[int, tuple[int, int]]:
    """tensor -> (object, the instruction that wrote it there; -1: resident at the start), for
    each tensor whole in an object just before instruction ``upto``."""
    sharing = sharing_objects(program.arena)
    tenant = {o: (t, -1) for t, o in program.initial_resident.items()}

    def write(t: int, o: int, i: int) -> None:
        for x in sharing[o]:
            tenant.pop(x, None)
        tenant[o] = (t, i)

    for i, ins in enumerate(program.instrs[:upto]):
        if ins.kind == COMPUTE:
            node = g.nodes[ins.target]
            for t, o in zip(node.outputs, ins.objects[len(node.inputs):]):
                write(t, o, i)
        elif ins.kind == SWAP_IN:
            write(ins.target, ins.obj, i)
    return {t: (o, w) for o, (t, w) in tenant.items()}


def with_objects(program: Program, sizes) -> tuple[Program, list[int]]:
    """A copy of ``program`` with new arena objects of ``sizes`` bytes after the existing ones
    (the operator scratch moves up), and their ids."""
    p = copy.deepcopy(program)
    a = p.arena
    at, new = a.scratch_offset, []
    offsets, sizes_of = list(a.object_offset), list(a.object_bytes)
    for s in sizes:
        new.append(len(offsets))
        offsets.append(at)
        sizes_of.append(int(aligned_bytes(s)))
        at += int(aligned_bytes(s))
    a.object_offset, a.object_bytes = np.array(offsets, np.int64), np.array(sizes_of, np.int64)
    a.arena_bytes = at + a.scratch_bytes
    return p, new


def insert(program: Program, at: int, ins: Instr) -> None:
    """Put ``ins`` at index ``at`` (its deps already in the old numbering, all before ``at``),
    renumbering every later instruction's dependencies."""
    for later in program.instrs[at:]:
        later.deps = [d + (d >= at) for d in later.deps]
    program.instrs.insert(at, ins)


def remove(program: Program, i: int) -> None:
    """Drop instruction ``i`` and every edge to it (the control run that shows a test can fail)."""
    del program.instrs[i]
    for ins in program.instrs:
        ins.deps = [d - (d > i) for d in ins.deps if d != i]


def compute_at(program: Program, g, node_id: int) -> int:
    """The index of node ``node_id``'s step in the schedule (its compute that is no recomputation)."""
    return next(i for i, ins in enumerate(program.instrs)
                if ins.kind == COMPUTE and ins.target == node_id and not ins.recompute)


def last_reader(program: Program, g, tensor: int) -> int:
    """The index of the last compute reading ``tensor``."""
    return max(i for i, ins in enumerate(program.instrs)
               if ins.kind == COMPUTE and tensor in g.nodes[ins.target].inputs)


def node_named(g, name: str) -> int:
    return next(n.id for n in g.nodes if n.name == name)


def recompute_before(program: Program, g, reader: int, node_id: int, inputs=None, outputs=None,
                     deps=None) -> tuple[Program, int]:
    """A copy of ``program`` in which node ``node_id`` is recomputed just before instruction
    ``reader`` and the reader reads the recomputed outputs. By default the recomputation reads
    its inputs where they are resident then, depends on the instructions that wrote them there,
    and writes new objects; ``inputs``, ``outputs`` (objects) and ``deps`` override that (the
    mutants). Returns the copy and the recomputation's index (``reader`` itself)."""
    node = g.nodes[node_id]
    held = residents(program, g, reader)
    if outputs is None:
        p, outputs = with_objects(program, [g.tensors[t].nbytes for t in node.outputs])
    else:
        p = copy.deepcopy(program)
    if inputs is None:
        inputs = [held[t][0] for t in node.inputs]
    if deps is None:
        deps = sorted({held[t][1] for t in node.inputs if t in held and held[t][1] >= 0})
    insert(p, reader, Instr(COMPUTE, node_id, objects=tuple(inputs) + tuple(outputs), deps=list(deps),
                            recompute=True))
    reading = p.instrs[reader + 1]
    rnode = g.nodes[reading.target]
    moved = dict(zip(node.outputs, outputs))
    objs = list(reading.objects)
    for k, t in enumerate(rnode.inputs):
        if t in moved:
            objs[k] = moved[t]
    reading.objects = tuple(objs)
    reading.deps = sorted(set(reading.deps) | {reader})
    return p, reader


def candidates(program: Program, g) -> list[tuple[int, int]]:
    """(reader, node) pairs a correct recomputation can serve: a compute reading an output of
    a recomputable node with inputs, after the node's step and after the output's first reader,
    with every input of the node still resident there."""
    out = []
    first_read: set[int] = set()
    producer = g.producer
    for i, ins in enumerate(program.instrs):
        if ins.kind != COMPUTE or ins.recompute:
            continue
        held = None
        for t in dict.fromkeys(g.nodes[ins.target].inputs):
            n = producer[t]
            if n < 0 or not recomputable(g.nodes[n]) or not g.nodes[n].inputs:
                continue
            if t not in first_read:
                first_read.add(t)
                continue
            held = held if held is not None else residents(program, g, i)
            if all(x in held for x in g.nodes[n].inputs):
                out.append((i, n))
    return out


def recomputing_program(program: Program, g, how_many: int = 1) -> Program:
    """``program`` with its first ``how_many`` candidates (``candidates``) served by
    recomputations, placed one after another (each found in the Program the last made)."""
    p = program
    for _ in range(how_many):
        served = {(p.instrs[i + 1].target, p.instrs[i].target) for i, ins in enumerate(p.instrs) if ins.recompute}
        reader, node = next((r, n) for r, n in candidates(p, g) if (p.instrs[r].target, n) not in served)
        p, _ = recompute_before(p, g, reader, node)
    return p


def cnn():
    """A small residual CNN: convolutions, batch norm, relu, pooling and SGD updates."""
    return small.residual_cnn(batch=2, image=8, channels=4, stages=2)


def serve(program: Program, g, name: str, **overrides) -> tuple[Program, int]:
    """``recompute_before`` for the first candidate reader of node ``name``'s output."""
    node = node_named(g, name)
    reader = next(r for r, n in candidates(program, g) if n == node)
    return recompute_before(program, g, reader, node, **overrides)


def from_swapped_in_input(program: Program, g, name: str, swapped: str, edge: bool = True) -> Program:
    """Node ``name`` recomputed for its first candidate reader from its input ``swapped`` swapped
    in again into a new object just before it (a cross-stream read), its other inputs where
    they are resident; ``edge`` False leaves out the edge from that swap-in to it."""
    node, t = node_named(g, name), next(x.id for x in g.tensors if x.name == swapped)
    reader = next(r for r, n in candidates(program, g) if n == node)
    held = residents(program, g, reader)
    p, (fresh,) = with_objects(program, [g.tensors[t].nbytes])
    insert(p, reader, Instr(SWAP_IN, t, fresh))
    inputs = [fresh if x == t else held[x][0] for x in g.nodes[node].inputs]
    p, _ = recompute_before(p, g, reader + 1, node, inputs=inputs, deps=[reader] if edge else [])
    return p


def recomputing_cnn(g, unlimited: Program, edge: bool = True) -> Program:
    """``cnn``'s unlimited Program with three outputs recreated by recomputation for a later
    reader: global_pool's (pooling), stage0/relu's (relu), and stem/conv/conv's (a convolution
    reading its input from a swap-in on the other stream; ``edge`` as in
    ``from_swapped_in_input``)."""
    p, _ = serve(unlimited, g, "global_pool")
    p, _ = serve(p, g, "stage0/relu")
    return from_swapped_in_input(p, g, "stem/conv/conv", "images", edge)
