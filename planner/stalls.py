"""Where one simulated iteration loses time: the stall report of a Program's Timeline.

- compute idle: the iteration's time minus the compute stream's busy time;
- copy/compute overlap: time during which a copy that moves bytes and a compute both run
  (the swapping that was hidden);
- both directions: time during which a swap-in and a swap-out both move bytes (the link then
  gives each half the duplex rate);
- swap-ins held by a swap-out: a swap-in that depends on a byte-moving swap-out of its own
  object and started the moment that swap-out finished (the eviction's write-back held the
  prefetch). Swap-outs with ``copy`` False move nothing: a swap-in waiting on one waits on
  the compute that released the object, and is not counted;
- compute waiting on swap-ins: for each compute that started the moment one of its swap-in
  dependencies finished, after its stream had been idle, the length of that idle gap;
- recomputations (computes with ``recompute`` set): how many, their seconds on the compute
  stream (counted in its busy time too), and the bytes of the outputs they recreate: each such
  output would otherwise have crossed the link twice, swapped out and back in.

Numpy over instructions and dependency edges; one pass of Python only to read the Program.
"""
from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass

import numpy as np

from engine.ir import Graph
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT, Program

from .simulate import Timeline


@dataclass(frozen=True)
class Stalls:
    total_s: float
    compute_busy_s: float
    compute_idle_s: float
    swap_in_busy_s: float             # swap-ins that move bytes, latency included
    swap_out_busy_s: float
    copy_compute_overlap_s: float
    both_directions_s: float
    swap_ins: int
    swap_ins_held_by_swap_out: int
    compute_wait_on_swap_in_s: float
    recomputes: int = 0
    recompute_s: float = 0.0          # compute-stream seconds of recomputations
    recomputed_bytes: int = 0         # outputs recreated on the device instead of swapped out and in

    @property
    def held_fraction(self) -> float:
        return self.swap_ins_held_by_swap_out / self.swap_ins if self.swap_ins else 0.0

    def to_json(self) -> dict:
        return dict(asdict(self), held_fraction=self.held_fraction)


@dataclass(frozen=True)
class _Instrs:
    """The Program's instructions as arrays, and its dependency edges (``owner`` waits for ``dep``)."""
    kind: np.ndarray
    obj: np.ndarray
    moves: np.ndarray        # a copy that moves bytes
    owner: np.ndarray
    dep: np.ndarray
    recompute: np.ndarray    # a compute that is a recomputation
    recomputed_bytes: int    # the bytes of the outputs recomputations write

    @classmethod
    def of(cls, program: Program, g: Graph) -> "_Instrs":
        instrs = program.instrs
        n = len(instrs)
        kind = np.fromiter((i.kind for i in instrs), dtype=np.int64, count=n)
        target = np.fromiter((i.target for i in instrs), dtype=np.int64, count=n)
        obj = np.fromiter((i.obj for i in instrs), dtype=np.int64, count=n)
        copy = np.fromiter((i.copy for i in instrs), dtype=bool, count=n)
        n_deps = np.fromiter((len(i.deps) for i in instrs), dtype=np.int64, count=n)
        dep = np.fromiter(itertools.chain.from_iterable(i.deps for i in instrs), dtype=np.int64,
                          count=int(n_deps.sum()))
        nbytes = np.array([t.nbytes for t in g.tensors], dtype=np.int64)
        moves = (kind != COMPUTE) & copy
        moves[moves] = nbytes[target[moves]] > 0
        recompute = np.fromiter((i.recompute for i in instrs), dtype=bool, count=n)
        recomputed = sum(int(nbytes[list(g.nodes[i.target].outputs)].sum()) for i in instrs if i.recompute)
        return cls(kind, obj, moves, np.repeat(np.arange(n), n_deps), dep, recompute, recomputed)


def covered(start: np.ndarray, finish: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Per elementary segment [grid[k], grid[k+1]): whether any interval covers it (every
    start and finish is a point of ``grid``)."""
    count = np.zeros(len(grid), dtype=np.int64)
    np.add.at(count, np.searchsorted(grid, start), 1)
    np.add.at(count, np.searchsorted(grid, finish), -1)
    return np.cumsum(count)[:-1] > 0


def stall_report(program: Program, g: Graph, timeline: Timeline) -> Stalls:
    """The stall figures of ``program`` (planned for ``g``) as ``timeline`` ran it."""
    ins = _Instrs.of(program, g)
    start, finish = np.asarray(timeline.start, dtype=float), np.asarray(timeline.finish, dtype=float)
    total = float(timeline.total)
    # Events that happened together carry the same float, so "the moment it finished" is
    # equality, up to a hair for robustness.
    same_moment = 1e-12 * max(total, 1.0)

    compute = ins.kind == COMPUTE
    swap_in = (ins.kind == SWAP_IN) & ins.moves
    swap_out = (ins.kind == SWAP_OUT) & ins.moves
    grid = np.unique(np.concatenate([start, finish, [0.0, total]]))
    seg = np.diff(grid)
    on = {name: covered(start[m], finish[m], grid) for name, m in
          (("compute", compute), ("in", swap_in), ("out", swap_out))}
    busy = finish - start

    # Swap-ins released by the write-back of the tensor leaving their object.
    o, d = ins.owner, ins.dep
    held = ((ins.kind[o] == SWAP_IN) & (ins.kind[d] == SWAP_OUT) & ins.moves[d] & (ins.obj[o] == ins.obj[d])
            & (np.abs(start[o] - finish[d]) <= same_moment))
    # Computes released by a swap-in, after an idle gap on the compute stream.
    computes = np.nonzero(compute)[0]
    computes = computes[np.argsort(start[computes], kind="stable")]
    gap = np.zeros(len(start))
    gap[computes] = start[computes] - np.concatenate(([0.0], finish[computes[:-1]]))
    waited = ((ins.kind[o] == COMPUTE) & (ins.kind[d] == SWAP_IN)
              & (np.abs(start[o] - finish[d]) <= same_moment) & (gap[o] > same_moment))
    waiting = np.unique(o[waited])

    compute_busy = float(busy[compute].sum())
    return Stalls(
        total_s=total,
        compute_busy_s=compute_busy,
        compute_idle_s=max(total - compute_busy, 0.0),
        swap_in_busy_s=float(busy[swap_in].sum()),
        swap_out_busy_s=float(busy[swap_out].sum()),
        copy_compute_overlap_s=float(seg[on["compute"] & (on["in"] | on["out"])].sum()),
        both_directions_s=float(seg[on["in"] & on["out"]].sum()),
        swap_ins=int(np.count_nonzero(ins.kind == SWAP_IN)),
        swap_ins_held_by_swap_out=int(len(np.unique(o[held]))),
        compute_wait_on_swap_in_s=float(gap[waiting].sum()),
        recomputes=int(np.count_nonzero(ins.recompute)),
        recompute_s=float(busy[ins.recompute].sum()),
        recomputed_bytes=ins.recomputed_bytes,
    )
