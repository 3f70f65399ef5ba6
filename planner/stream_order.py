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

import numba
import numpy as np

from engine.ir import Graph
from engine.profile import Profile
from engine.program import COMPUTE, Program

from .dispatch import run_arrays
from .program_arrays import ProgramArrays


def urgency(program: Program | ProgramArrays) -> np.ndarray:
    """Per instruction: the program index of the earliest compute that waits for it (itself,
    for a compute); copies nothing waits for come last."""
    a = program if isinstance(program, ProgramArrays) else ProgramArrays.of(program.instrs)
    return _urgency(a.kind, a.dep_ptr, a.deps)


@numba.njit(cache=True)
def _urgency(kind, dep_ptr, deps):
    n = kind.shape[0]
    due = np.full(n, float(n))
    for i in range(n - 1, -1, -1):
        if kind[i] == 0:
            due[i] = i
        for e in range(dep_ptr[i], dep_ptr[i + 1]):
            d = deps[e]
            if due[i] < due[d]:
                due[d] = due[i]
    return due


def order_copies(program: Program, g: Graph, profile: Profile, node_seconds: np.ndarray) -> Program:
    """The Program with its copy streams reordered by urgency (compute keeps its order);
    instructions renumbered in dispatch order, edges within a stream dropped as implied."""
    tensor_bytes = np.fromiter((t.nbytes for t in g.tensors), dtype=np.float64, count=len(g.tensors))
    arrays = order_arrays(ProgramArrays.of(program.instrs), tensor_bytes, node_seconds, profile)
    return dataclasses.replace(program, instrs=arrays.to_instrs())


def order_arrays(a: ProgramArrays, tensor_bytes: np.ndarray, node_seconds: np.ndarray,
                 profile: Profile) -> ProgramArrays:
    """``order_copies`` on arrays (``tensor_bytes`` as float64, per tensor)."""
    _, _, order = run_arrays(a, tensor_bytes, np.asarray(node_seconds, dtype=np.float64), profile,
                             urgency(a), in_order=(COMPUTE,))
    return renumber_arrays(a, np.asarray(order, dtype=np.int64))


def renumber_arrays(a: ProgramArrays, order: np.ndarray) -> ProgramArrays:
    """The instructions in ``order`` (a valid sequential execution), dependency indices
    remapped and same-stream edges dropped."""
    return ProgramArrays(*_renumber(a.kind, a.target, a.obj, a.copy, a.dep_ptr, a.deps, a.obj_ptr, a.objects,
                                    order), a.recompute[order])


@numba.njit(cache=True)
def _renumber(kind, target, obj, copy, dep_ptr, deps, obj_ptr, objects, order):
    n = order.shape[0]
    new_index = np.empty(n, dtype=np.int64)
    for j in range(n):
        new_index[order[j]] = j
    n_kind = kind[order]
    n_target = target[order]
    n_obj = obj[order]
    n_copy = copy[order]
    n_dep_ptr = np.zeros(n + 1, dtype=np.int64)
    n_deps = np.empty(deps.shape[0], dtype=np.int64)
    n_obj_ptr = np.zeros(n + 1, dtype=np.int64)
    n_objects = np.empty(objects.shape[0], dtype=np.int64)
    e_out = 0
    o_out = 0
    for j in range(n):
        i = order[j]
        start = e_out
        for e in range(dep_ptr[i], dep_ptr[i + 1]):
            d = deps[e]
            if kind[d] != kind[i]:
                x = new_index[d]          # insertion sort: a handful of edges
                b = e_out - 1
                while b >= start and n_deps[b] > x:
                    n_deps[b + 1] = n_deps[b]
                    b -= 1
                n_deps[b + 1] = x
                e_out += 1
        n_dep_ptr[j + 1] = e_out
        for e in range(obj_ptr[i], obj_ptr[i + 1]):
            n_objects[o_out] = objects[e]
            o_out += 1
        n_obj_ptr[j + 1] = o_out
    return n_kind, n_target, n_obj, n_copy, n_dep_ptr, n_deps[:e_out], n_obj_ptr, n_objects[:o_out]
