"""A Program's instructions as flat arrays: what the compiled planner emits and the compiled
dispatch loop reads.

The planner and the simulator run once per candidate of the search, thousands of times,
so their loops are compiled (numba) over these arrays; ``Instr`` objects are made only
for a Program someone keeps (``to_instrs``). Deps and compute objects are in CSR form:
instruction i's dependencies are ``deps[dep_ptr[i]:dep_ptr[i + 1]]``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from engine.program import Instr


@dataclass
class ProgramArrays:
    kind: np.ndarray      # int8: COMPUTE, SWAP_IN, SWAP_OUT
    target: np.ndarray    # int64: node id (compute) or tensor id (copies)
    obj: np.ndarray       # int64: the copy's object; -1 for compute
    copy: np.ndarray      # bool: a swap-out that moves bytes (always True for others)
    dep_ptr: np.ndarray   # int64, n + 1
    deps: np.ndarray      # int64: sorted, unique per instruction
    obj_ptr: np.ndarray   # int64, n + 1: a compute's objects (inputs then outputs)
    objects: np.ndarray   # int64
    # bool: a compute that is a recomputation (Instr.recompute); None: none is
    recompute: np.ndarray | None = field(default=None)

    def __post_init__(self):
        if self.recompute is None:
            self.recompute = np.zeros(len(self.kind), dtype=np.bool_)

    def __len__(self) -> int:
        return len(self.kind)

    @classmethod
    def of(cls, instrs: list[Instr]) -> "ProgramArrays":
        n = len(instrs)
        kind = np.fromiter((i.kind for i in instrs), dtype=np.int8, count=n)
        target = np.fromiter((i.target for i in instrs), dtype=np.int64, count=n)
        obj = np.fromiter((i.obj for i in instrs), dtype=np.int64, count=n)
        copy = np.fromiter((i.copy for i in instrs), dtype=np.bool_, count=n)
        dep_ptr, deps = _sorted_unique_rows([i.deps for i in instrs])
        obj_ptr = np.zeros(n + 1, dtype=np.int64)
        obj_ptr[1:] = np.cumsum([len(i.objects) for i in instrs])
        objects = np.fromiter((o for i in instrs for o in i.objects), dtype=np.int64, count=int(obj_ptr[-1]))
        recompute = np.fromiter((i.recompute for i in instrs), dtype=np.bool_, count=n)
        return cls(kind, target, obj, copy, dep_ptr, deps, obj_ptr, objects, recompute)

    def to_instrs(self) -> list[Instr]:
        kind, target, obj, copy = self.kind.tolist(), self.target.tolist(), self.obj.tolist(), self.copy.tolist()
        dp, deps, op, objects = self.dep_ptr.tolist(), self.deps.tolist(), self.obj_ptr.tolist(), self.objects.tolist()
        recompute = self.recompute.tolist()
        return [Instr(kind[i], target[i], obj[i], tuple(objects[op[i]:op[i + 1]]), copy[i], deps[dp[i]:dp[i + 1]],
                      recompute[i])
                for i in range(len(kind))]


def _sorted_unique_rows(rows: list) -> tuple[np.ndarray, np.ndarray]:
    """CSR (ptr, values) of ``rows`` (sequences of ints), each row sorted and without repeats:
    one sort of all values by (row, value) instead of a set and a sort per row."""
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    values = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
    row = np.repeat(np.arange(len(rows), dtype=np.int64), lengths)
    order = np.lexsort((values, row))
    values, row = values[order], row[order]
    fresh = np.ones(len(values), dtype=bool)
    fresh[1:] = (values[1:] != values[:-1]) | (row[1:] != row[:-1])
    values, row = values[fresh], row[fresh]
    ptr = np.zeros(len(rows) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(np.bincount(row, minlength=len(rows)))
    return ptr, values

