"""The augmented graph (SwapAdvisor Section 4.2): what a backend runs.

A Program is a list of instructions in a global order that is always a valid
sequential execution. Each instruction runs on one of three in-order streams:

- COMPUTE: run graph node ``target``; ``objects`` gives the arena object of each
  of its inputs then each of its outputs;
- SWAP_IN: copy tensor ``target`` from its host copy into arena object ``obj``;
- SWAP_OUT: copy tensor ``target`` from arena object ``obj`` to its host copy
  (``copy`` False: the host copy is already current, so nothing moves and the
  instruction only marks the point after which the object may be reused).

A compute with ``recompute`` set is a recomputation: node ``target`` run again, outside the
schedule's order, to recreate outputs a plan dropped instead of copying them out (only nodes
``engine.recompute.recomputable`` allows; the verifier checks that its inputs hold the values
the node first read).

``deps[i]`` lists instructions that must finish before i starts (data, control
and memory-reuse edges); order within a stream is implied.

Memory: the ``Arena`` is what the allocator that carved it hands over: a table of
objects, each a byte range (offset, size) in one arena, followed by ``scratch_bytes``
of operator scratch at the arena's end (kernels that declare ``Op.workspace`` use it,
one operator at a time on the compute stream); the arena, scratch included, is what a
budget bounds. Objects may share bytes (an allocator that carves the arena differently
over time); the verifier treats such objects as one memory. ``allocator`` records which
allocator carved it and its parameters (e.g. the size classes), for people and for
re-planning; nothing that runs or checks the Program reads it.

Virtual addressing (paper 001's ``va`` allocator): ``mappings``, when present, is a page table
of rows (virtual offset, physical offset, bytes). Object ranges are then virtual ranges (in
``virtual_bytes``), each backed by the physical bytes its range translates to through the rows
(``physical_extents``); ``arena_bytes`` is physical memory (rows' physical bytes, then scratch).
Backends map every row once when the arena is made; the verifier compares physical extents.

Persistent state: ``initial_resident`` maps parameter/state tensors to the
object holding them when an iteration starts; the program leaves each one's
next value in that same object (the double pass makes this a fixed point), and
writes every other next value to its host copy.

JSON schema (``to_dict``): {"format": "swapengine.program/2", "graph": name,
"graph_fingerprint": the graph's fingerprint, "schedule": [node ids],
"arena": {"object_offset", "object_bytes": [ints], "arena_bytes": int,
"scratch_bytes": int, "allocator": {"name": str, ...}},
"initial_resident": [[tensor, object]], "instructions": [{"kind":
"compute"|"swap_in"|"swap_out", "target": int, "obj": int, "objects": [ints],
"copy": bool, "deps": [ints]}], "policy": str}. An arena with a page table is written as
"swapengine.program/3" with "mappings": [[virtual, physical, bytes]] and "virtual_bytes": int in
"arena" (a reader that knows only version 2 refuses it instead of misreading it). A Program with
recomputations is written as "swapengine.program/4": instructions may carry "recompute": true,
and "arena" has "mappings" and "virtual_bytes" when it has a page table. Versions 2 and 3 are
read as before.

Data parallelism (issue 41): a Program planned for ``ranks`` > 1 data-parallel ranks may hold
ALLREDUCE instructions, on a fourth in-order stream: each sums a bucket of gradient tensors
(``bucket``, ``target`` its first) across the ranks in place, in their objects (``objects``, one
per tensor). It is written as "swapengine.program/5" with "ranks": N and, on those instructions,
"kind": "allreduce" and "bucket": [tensors]; recomputations and a page table as in version 4.
A Program without them is written as before (its digest unchanged).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from .errors import EngineError

COMPUTE, SWAP_IN, SWAP_OUT = 0, 1, 2
ALLREDUCE = 3                    # data-parallel: a bucket of gradients summed across the ranks, on its own stream
STREAMS = (COMPUTE, SWAP_IN, SWAP_OUT)
ALL_STREAMS = STREAMS + (ALLREDUCE,)
STREAM_NAMES = ("compute", "swap_in", "swap_out", "allreduce")
FORMAT = "swapengine.program/2"
FORMAT_VIRTUAL = "swapengine.program/3"    # the arena carries a page table (mappings)
FORMAT_RECOMPUTE = "swapengine.program/4"  # instructions may be recomputations (page table optional)
FORMAT_RANKS = "swapengine.program/5"      # a plan for N ranks: all-reduce instructions (the rest optional)
FORMATS = (FORMAT, FORMAT_VIRTUAL, FORMAT_RECOMPUTE, FORMAT_RANKS)


def sharing_objects(arena) -> list[list[int]]:
    """Per object, the other objects that share at least one PHYSICAL byte with it (usually
    none: a size-class layout's objects are disjoint; under virtual addressing, objects whose
    ranges map to one chunk). Every pair: quadratic in the objects one chunk sees over an
    iteration, so the verifier (``engine.physical_bytes``) and the online policies
    (``planner.reuse_edges.reuse_edges_by_bytes``) walk runs of bytes instead; the executor
    and the tests use it."""
    pieces = [(start, size, o) for o, extents in enumerate(arena.all_physical_extents())
              for start, size in extents if size > 0]
    pieces.sort(key=lambda piece: piece[0])
    shared: list[set[int]] = [set() for _ in range(arena.num_objects)]
    active: list[tuple[int, int]] = []      # (end, object) of pieces that may reach the next start
    for start, size, o in pieces:
        active = [(end, a) for end, a in active if end > start]
        for _, a in active:
            if a != o:
                shared[a].add(o)
                shared[o].add(a)
        active.append((start + size, o))
    return [sorted(s) for s in shared]


class ProgramFormatError(EngineError, ValueError):
    """A plan file that is not a well-formed Program."""


INT64 = (-2**63, 2**63 - 1)


def _int(v, key: str, low: int = INT64[0]) -> int:
    """``v`` if it is an integer (not a bool, not a float) from ``low`` to 2**63 - 1: what an
    arena's int64 arrays and the executor's offsets hold exactly."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and low <= v <= INT64[1]:
        return int(v)
    lowest = "0" if low == 0 else "-2**63"
    raise ProgramFormatError(f"malformed program description: '{key}' must be an integer from {lowest} to "
                             f"2**63 - 1, got {v!r:.40}")


def _bool(v, key: str) -> bool:
    """``v`` if it is JSON's true or false: bool("no") is True, so a string or a number is refused."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise ProgramFormatError(f"malformed program description: '{key}' must be true or false, got {v!r:.40}")


def _ints(values, key: str, low: int = INT64[0]) -> list[int]:
    if not isinstance(values, (list, tuple)):
        raise ProgramFormatError(f"malformed program description: '{key}' must be a list of integers, got "
                                 f"{values!r:.40}")
    return [_int(v, key, low) for v in values]


@dataclass
class Arena:
    """Objects as byte ranges in one arena, then operator scratch in its last ``scratch_bytes``."""
    object_offset: np.ndarray
    object_bytes: np.ndarray
    arena_bytes: int
    scratch_bytes: int = 0
    allocator: dict = field(default_factory=dict)   # {"name": ..., its parameters}: for people
    mappings: np.ndarray | None = None   # (k, 3) rows (virtual, physical, bytes); None: plain byte ranges
    virtual_bytes: int = 0               # the virtual address space the rows span (with mappings)

    @property
    def scratch_offset(self) -> int:
        return self.arena_bytes - self.scratch_bytes

    @property
    def virtual(self) -> bool:
        """Objects are virtual ranges backed through the page table ``mappings``."""
        return self.mappings is not None

    def physical_extents(self, o: int, _rows: np.ndarray | None = None) -> list[tuple[int, int]]:
        """Object o's bytes as (physical offset, bytes) pieces in its range's order (one piece
        for a plain arena). A byte of its range that no row maps is a ValueError."""
        start, size = int(self.object_offset[o]), int(self.object_bytes[o])
        if not self.virtual:
            return [(start, size)]
        rows = self.mappings[np.argsort(self.mappings[:, 0], kind="stable")] if _rows is None else _rows
        i = max(0, int(np.searchsorted(rows[:, 0], start, side="right")) - 1)
        pieces, at, end = [], start, start + size
        while at < end:
            if i >= len(rows) or not rows[i, 0] <= at < rows[i, 0] + rows[i, 2]:
                raise ValueError(f"byte {at} of object {o}'s virtual range is not mapped")
            v, p, n = (int(x) for x in rows[i])
            take = min(end, v + n) - at
            pieces.append((p + at - v, take))
            at += take
            i += 1
        return pieces

    def all_physical_extents(self) -> list[list[tuple[int, int]]]:
        """``physical_extents`` of every object (the page table sorted once)."""
        ptr, start, size = self.physical_pieces()
        start, size, bounds = start.tolist(), size.tolist(), ptr.tolist()
        return [list(zip(start[a:b], size[a:b])) for a, b in zip(bounds, bounds[1:])]

    def physical_pieces(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every object's ``physical_extents`` at once, as arrays: object o's pieces are
        ``start[ptr[o]:ptr[o + 1]]`` and ``size[...]`` in its range's order. Vectorized over the
        page table (a chunked plan's objects have hundreds of thousands of pieces); a byte that
        no row maps is the ValueError ``physical_extents`` raises for the first such object."""
        off, nbytes = self.object_offset.astype(np.int64), self.object_bytes.astype(np.int64)
        n_obj = len(off)
        if not self.virtual:
            return np.arange(n_obj + 1, dtype=np.int64), off.copy(), nbytes.copy()
        rows = self.mappings[np.argsort(self.mappings[:, 0], kind="stable")].astype(np.int64)
        v, ph, n = rows[:, 0], rows[:, 1], rows[:, 2]
        plain = (len(rows) > 0 and n_obj > 0 and bool(np.all(n > 0)) and bool(np.all(v[:-1] + n[:-1] <= v[1:]))
                 and bool(np.all((off >= 0) & (nbytes >= 0) & (off <= np.iinfo(np.int64).max - nbytes))))
        if not plain:       # overlapping rows, empty ones, ranges past int64: the walk decides
            extents = [self.physical_extents(o, rows) for o in range(n_obj)]
            ptr = np.zeros(n_obj + 1, dtype=np.int64)
            ptr[1:] = np.cumsum([len(e) for e in extents])
            flat = [piece for e in extents for piece in e]
            return (ptr, np.array([a for a, _ in flat], dtype=np.int64).reshape(-1),
                    np.array([b for _, b in flat], dtype=np.int64).reshape(-1))
        end = off + nbytes
        first = np.searchsorted(v, off, side="right") - 1            # the row holding the first byte
        last = np.searchsorted(v, end - 1, side="right") - 1         # the row holding the last byte
        breaks = np.concatenate(([0], np.cumsum(v[:-1] + n[:-1] != v[1:])))   # gaps before each row
        safe_first, safe_last = np.maximum(first, 0), np.maximum(last, 0)
        mapped = ((first >= 0) & (off < v[safe_first] + n[safe_first]) & (end - 1 < v[safe_last] + n[safe_last])
                  & (breaks[safe_last] == breaks[safe_first]))
        empty = nbytes == 0
        if not np.all(mapped | empty):
            self.physical_extents(int(np.flatnonzero(~(mapped | empty))[0]), rows)   # raises, naming the byte
        count = np.where(empty, 0, last - first + 1)
        ptr = np.zeros(n_obj + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(count)
        owner = np.repeat(np.arange(n_obj), count)
        row = first[owner] + (np.arange(int(ptr[-1])) - ptr[owner])
        lo, hi = np.maximum(off[owner], v[row]), np.minimum(end[owner], v[row] + n[row])
        return ptr, ph[row] + (lo - v[row]), hi - lo

    @property
    def num_objects(self) -> int:
        return len(self.object_offset)

    @classmethod
    def of(cls, layout, scratch_bytes: int) -> "Arena":
        """The arena of an allocator's layout (anything with ``object_offset``, ``object_bytes``,
        ``arena_bytes`` and ``describe()``), with operator scratch after its objects."""
        mappings = getattr(layout, "mappings", None)
        return cls(np.asarray(layout.object_offset, dtype=np.int64),
                   np.asarray(layout.object_bytes, dtype=np.int64),
                   int(layout.arena_bytes) + int(scratch_bytes), int(scratch_bytes), layout.describe(),
                   None if mappings is None else np.asarray(mappings, dtype=np.int64).reshape(-1, 3),
                   int(getattr(layout, "virtual_bytes", 0)))


@dataclass
class Instr:
    kind: int
    target: int
    obj: int = -1
    objects: tuple[int, ...] = ()
    copy: bool = True
    deps: list[int] = field(default_factory=list)
    recompute: bool = False          # a compute: the node run again (not its step in the schedule)
    bucket: tuple[int, ...] = ()     # an all-reduce: the gradient tensors it sums across the ranks


@dataclass
class Program:
    graph_name: str
    schedule: list[int]
    arena: Arena
    instrs: list[Instr]
    initial_resident: dict[int, int]
    policy: str = ""
    graph_fingerprint: str = ""      # Graph.fingerprint() of the graph it was planned for
    ranks: int = 1                   # data-parallel ranks it was planned for (its all-reduces' ring)

    def count(self, kind: int) -> int:
        return sum(1 for i in self.instrs if i.kind == kind)

    @property
    def recomputes(self) -> int:
        """How many compute instructions are recomputations."""
        return sum(1 for i in self.instrs if i.recompute)

    def bytes_moved(self, graph, kind: int) -> int:
        """Bytes copied by the SWAP_IN or SWAP_OUT instructions of one iteration."""
        return sum(graph.tensors[i.target].nbytes for i in self.instrs if i.kind == kind and i.copy)

    def describe(self, graph, i: int) -> str:
        ins = self.instrs[i]
        if ins.kind == COMPUTE:
            what = "recompute" if ins.recompute else "compute"
            return f"instruction {i} ({what} '{graph.nodes[ins.target].name}')"
        if ins.kind == ALLREDUCE:
            more = f" and {len(ins.bucket) - 1} more" if len(ins.bucket) > 1 else ""
            return f"instruction {i} (allreduce '{graph.tensors[ins.target].name}'{more})"
        return f"instruction {i} ({STREAM_NAMES[ins.kind]} '{graph.tensors[ins.target].name}')"

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict:
        a = self.arena
        arena = {"object_offset": a.object_offset.tolist(), "object_bytes": a.object_bytes.tolist(),
                 "arena_bytes": int(a.arena_bytes), "scratch_bytes": int(a.scratch_bytes),
                 "allocator": a.allocator}
        if a.virtual:
            arena.update(mappings=a.mappings.tolist(), virtual_bytes=int(a.virtual_bytes))
        recomputes = any(i.recompute for i in self.instrs)
        reduces = self.ranks != 1 or any(i.kind == ALLREDUCE for i in self.instrs)
        return {
            "format": (FORMAT_RANKS if reduces else FORMAT_RECOMPUTE if recomputes else FORMAT_VIRTUAL if a.virtual
                       else FORMAT),
            **({"ranks": int(self.ranks)} if reduces else {}),
            "graph": self.graph_name,
            "graph_fingerprint": self.graph_fingerprint, "policy": self.policy,
            "schedule": [int(n) for n in self.schedule],
            "arena": arena,
            "initial_resident": [[int(t), int(o)] for t, o in self.initial_resident.items()],
            "instructions": [{"kind": STREAM_NAMES[i.kind], "target": int(i.target), "obj": int(i.obj),
                              "objects": [int(o) for o in i.objects], "copy": bool(i.copy),
                              "deps": [int(d) for d in i.deps], **({"recompute": True} if i.recompute else {}),
                              **({"bucket": [int(t) for t in i.bucket]} if i.kind == ALLREDUCE else {})}
                             for i in self.instrs],
        }

    @classmethod
    def from_dict(cls, d) -> "Program":
        """Parse a program description; ProgramFormatError (one line) if malformed.
        Whether it is *safe* is planner.verify's question, asked before it runs."""
        if not isinstance(d, dict) or d.get("format") not in FORMATS:
            raise ProgramFormatError(f"not a swapengine program (expected format '{FORMAT}', "
                                     f"'{FORMAT_VIRTUAL}' for an arena with a page table, "
                                     f"'{FORMAT_RECOMPUTE}' for one with recomputations, or "
                                     f"'{FORMAT_RANKS}' for a plan for several ranks)")
        try:
            a = d["arena"]
            mappings = None
            if d["format"] == FORMAT_VIRTUAL or (d["format"] in (FORMAT_RECOMPUTE, FORMAT_RANKS) and "mappings" in a):
                mappings = np.asarray([_ints(row, "mappings", 0) for row in a["mappings"]],
                                      dtype=np.int64).reshape(-1, 3)
            arena = Arena(*(np.asarray(_ints(a[k], k, 0), dtype=np.int64) for k in ("object_offset", "object_bytes")),
                          _int(a["arena_bytes"], "arena_bytes", 0), _int(a["scratch_bytes"], "scratch_bytes", 0),
                          dict(a.get("allocator", {})), mappings,
                          _int(a["virtual_bytes"], "virtual_bytes", 0) if mappings is not None else 0)
            if arena.object_offset.shape != arena.object_bytes.shape or arena.object_offset.ndim != 1:
                raise ValueError("object_offset and object_bytes must be flat lists of one length")
            ranked = d["format"] == FORMAT_RANKS
            kinds = {name: k for k, name in enumerate(STREAM_NAMES) if ranked or k != ALLREDUCE}
            recomputes = d["format"] in (FORMAT_RECOMPUTE, FORMAT_RANKS)
            if not recomputes and any(isinstance(i, dict) and i.get("recompute") for i in d["instructions"]):
                raise ValueError(f"an instruction is a recomputation, which format {d['format']} cannot hold "
                                 f"(write it as {FORMAT_RECOMPUTE})")
            instrs = [Instr(kinds[i["kind"]], _int(i["target"], "target"), _int(i["obj"], "obj"),
                            tuple(_ints(i["objects"], "objects")), _bool(i["copy"], "copy"), _ints(i["deps"], "deps"),
                            recomputes and _bool(i.get("recompute", False), "recompute"),
                            tuple(_ints(i["bucket"], "bucket")) if kinds[i["kind"]] == ALLREDUCE else ())
                      for i in d["instructions"]]
            if any(ins.recompute and ins.kind != COMPUTE for ins in instrs):
                raise ValueError("only a compute instruction may be a recomputation")
            ranks = _int(d["ranks"], "ranks", 1) if ranked else 1
            return cls(str(d["graph"]), _ints(d["schedule"], "schedule"), arena, instrs,
                       {_int(t, "initial_resident"): _int(o, "initial_resident") for t, o in d["initial_resident"]},
                       str(d.get("policy", "")), str(d.get("graph_fingerprint", "")), ranks)
        except ProgramFormatError:
            raise
        except (KeyError, TypeError, ValueError) as e:
            raise ProgramFormatError(f"malformed program description: {e!r}") from None
