"""Copy-stream order by urgency: the order in which the swap-in and swap-out streams issue
their copies, chosen by running the Program with copy streams that, whenever idle, start the
most urgent copy whose dependencies have finished.

The planner emits copies in the order it decides them, which is not the order they can run:
a swap-in that waits for compute to release its object holds every swap-in queued behind
it, even those whose objects are already free. Here each copy's urgency is the position of
the first compute that (transitively) waits for it; the order the copy streams ended up
using becomes their program order, and the in-order simulator replays that timeline.

Safe because every ordering the planner needs is an explicit dependency (the planner keeps
same-stream edges until this pass has run); stream order then only adds edges.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from engine.ir import Graph
from engine.profile import Profile
from engine.program import COMPUTE, Instr, Program

from .dispatch import run_streams


def urgency(program: Program) -> np.ndarray:
    """Per instruction: the program index of the earliest compute that waits for it (itself,
    for a compute); copies nothing waits for come last."""
    instrs = program.instrs
    n = len(instrs)
    due = np.full(n, float(n))
    for i in range(n - 1, -1, -1):
        ins = instrs[i]
        if ins.kind == COMPUTE:
            due[i] = i
        for d in ins.deps:
            if due[i] < due[d]:
                due[d] = due[i]
    return due


def order_copies(program: Program, g: Graph, profile: Profile, node_seconds: np.ndarray) -> Program:
    """The Program with its copy streams reordered by urgency (compute keeps its order);
    instructions renumbered in dispatch order, edges within a stream dropped as implied."""
    _, _, order = run_streams(program, g, profile, node_seconds, urgency(program), in_order=(COMPUTE,))
    return renumber(program, order)


def renumber(program: Program, order: list[int]) -> Program:
    """The Program with instructions in ``order`` (a valid sequential execution), dependency
    indices remapped and same-stream edges dropped."""
    new_index = np.empty(len(order), dtype=np.int64)
    new_index[np.asarray(order, dtype=np.int64)] = np.arange(len(order))
    old = program.instrs
    instrs = []
    for i in order:
        ins = old[i]
        deps = sorted(int(new_index[d]) for d in set(ins.deps) if old[d].kind != ins.kind)
        instrs.append(Instr(ins.kind, ins.target, ins.obj, ins.objects, ins.copy, deps))
    return dataclasses.replace(program, instrs=instrs)
