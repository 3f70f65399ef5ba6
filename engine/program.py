"""The augmented graph (SwapAdvisor Section 4.2): what a backend runs.

A Program is a list of instructions in a global order that is always a valid
sequential execution. Each instruction runs on one of three in-order streams:

- COMPUTE: run graph node ``target``; ``objects`` gives the pool object of each
  of its inputs then each of its outputs;
- SWAP_IN: copy tensor ``target`` from its host copy into pool object ``obj``;
- SWAP_OUT: copy tensor ``target`` from pool object ``obj`` to its host copy
  (``copy`` False: the host copy is already current, so nothing moves and the
  instruction only marks the point after which the object may be reused).

``deps[i]`` lists instructions that must finish before i starts (data, control
and memory-reuse edges); order within a stream is implied. The pool is a table
of objects (byte offset, byte size, size class) inside one arena, followed by
``scratch_bytes`` of operator scratch at the arena's end (kernels that declare
``Op.workspace`` use it, one operator at a time on the compute stream); the arena,
scratch included, is what a budget bounds.

Persistent state: ``initial_resident`` maps parameter/state tensors to the
object holding them when an iteration starts; the program leaves each one's
next value in that same object (the double pass makes this a fixed point), and
writes every other next value to its host copy.

JSON schema (``to_dict``): {"format": "swapengine.program/1", "graph": name,
"graph_fingerprint": Graph.fingerprint(),
"schedule": [node ids], "pool": {"object_offset", "object_bytes",
"object_class": [ints], "arena_bytes": int, "scratch_bytes": int, "sizes", "cls",
"cnt": [ints]},
"initial_resident": [[tensor, object]], "instructions": [{"kind":
"compute"|"swap_in"|"swap_out", "target": int, "obj": int, "objects": [ints],
"copy": bool, "deps": [ints]}], "policy": str}.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

COMPUTE, SWAP_IN, SWAP_OUT = 0, 1, 2
STREAMS = (COMPUTE, SWAP_IN, SWAP_OUT)
STREAM_NAMES = ("compute", "swap_in", "swap_out")
FORMAT = "swapengine.program/1"


class ProgramFormatError(ValueError):
    pass


@dataclass
class Pool:
    """Objects in one arena, then operator scratch in its last ``scratch_bytes``.
    ``sizes``/``cls``/``cnt`` are the allocation (TS, CLS, CNT)."""
    object_offset: np.ndarray
    object_bytes: np.ndarray
    object_class: np.ndarray
    arena_bytes: int
    sizes: np.ndarray
    cls: np.ndarray
    cnt: np.ndarray
    scratch_bytes: int = 0

    @property
    def scratch_offset(self) -> int:
        return self.arena_bytes - self.scratch_bytes

    def class_of_size(self, nbytes: int) -> int:
        i = int(np.searchsorted(self.sizes, nbytes))
        if i >= len(self.sizes) or self.sizes[i] != nbytes:
            return -1
        return int(self.cls[i])


@dataclass
class Instr:
    kind: int
    target: int
    obj: int = -1
    objects: tuple[int, ...] = ()
    copy: bool = True
    deps: list[int] = field(default_factory=list)


@dataclass
class Program:
    graph_name: str
    schedule: list[int]
    pool: Pool
    instrs: list[Instr]
    initial_resident: dict[int, int]
    policy: str = ""
    graph_fingerprint: str = ""      # Graph.fingerprint() of the graph it was planned for

    def count(self, kind: int) -> int:
        return sum(1 for i in self.instrs if i.kind == kind)

    def bytes_moved(self, graph, kind: int) -> int:
        """Bytes copied by the SWAP_IN or SWAP_OUT instructions of one iteration."""
        return sum(graph.tensors[i.target].nbytes for i in self.instrs if i.kind == kind and i.copy)

    def describe(self, graph, i: int) -> str:
        ins = self.instrs[i]
        if ins.kind == COMPUTE:
            return f"instruction {i} (compute '{graph.nodes[ins.target].name}')"
        return f"instruction {i} ({STREAM_NAMES[ins.kind]} '{graph.tensors[ins.target].name}')"

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict:
        p = self.pool
        return {
            "format": FORMAT, "graph": self.graph_name, "graph_fingerprint": self.graph_fingerprint,
            "policy": self.policy,
            "schedule": [int(n) for n in self.schedule],
            "pool": {"object_offset": p.object_offset.tolist(), "object_bytes": p.object_bytes.tolist(),
                     "object_class": p.object_class.tolist(), "arena_bytes": int(p.arena_bytes),
                     "scratch_bytes": int(p.scratch_bytes),
                     "sizes": p.sizes.tolist(), "cls": p.cls.tolist(), "cnt": p.cnt.tolist()},
            "initial_resident": [[int(t), int(o)] for t, o in self.initial_resident.items()],
            "instructions": [{"kind": STREAM_NAMES[i.kind], "target": int(i.target), "obj": int(i.obj),
                              "objects": [int(o) for o in i.objects], "copy": bool(i.copy),
                              "deps": [int(d) for d in i.deps]}
                             for i in self.instrs],
        }

    @classmethod
    def from_dict(cls, d) -> "Program":
        """Parse a program description; ProgramFormatError (one line) if malformed.
        Whether it is *safe* is planner.verify's question, asked before it runs."""
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ProgramFormatError(f"not a swapengine program (expected format '{FORMAT}')")
        try:
            p = d["pool"]
            pool = Pool(*(np.asarray(p[k], dtype=np.int64) for k in ("object_offset", "object_bytes",
                                                                      "object_class")),
                        int(p["arena_bytes"]),
                        *(np.asarray(p[k], dtype=np.int64) for k in ("sizes", "cls", "cnt")),
                        int(p.get("scratch_bytes", 0)))
            kinds = {name: k for k, name in enumerate(STREAM_NAMES)}
            instrs = [Instr(kinds[i["kind"]], int(i["target"]), int(i["obj"]),
                            tuple(int(o) for o in i["objects"]), bool(i["copy"]),
                            [int(x) for x in i["deps"]]) for i in d["instructions"]]
            return cls(str(d["graph"]), [int(n) for n in d["schedule"]], pool, instrs,
                       {int(t): int(o) for t, o in d["initial_resident"]}, str(d.get("policy", "")),
                       str(d.get("graph_fingerprint", "")))
        except (KeyError, TypeError, ValueError) as e:
            raise ProgramFormatError(f"malformed program description: {e!r}") from None
