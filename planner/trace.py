"""The simulated iteration as a Chrome trace (open in Perfetto or chrome://tracing), built for
``Timeline.to_chrome_trace``:

- one row per stream, one slice per instruction; a recomputation's slice is named
  "recompute <node>" in category "recompute", so it stands apart from the node's own step;
- a counter track of the device bytes in use: an object is in use from the start of the
  instruction that writes its tenant (a compute's output, a swap-in) until the finish of the
  last instruction that uses that tenant (a compute's input, a swap-out). State resident
  across iterations holds its object from the iteration's start and its next value to the
  end. The series stack: tenant bytes, the slack of objects larger than their tenant, and the
  operator scratch (constant: reserved for the whole iteration);
- a flow arrow for every dependency edge that crosses streams.
"""
from __future__ import annotations

import numpy as np

from engine.ir import Graph
from engine.program import ALLREDUCE, COMPUTE, STREAM_NAMES, SWAP_IN, Program

MEMORY_COUNTER = "device bytes in use"
RECOMPUTE = "recompute"      # the category (and name prefix) of recomputations' slices


def stream_slices(program: Program, g: Graph, start: np.ndarray, finish: np.ndarray) -> list[dict]:
    streams = 4 if any(ins.kind == ALLREDUCE for ins in program.instrs) else 3
    events = [{"ph": "M", "pid": 0, "tid": k, "name": "thread_name", "args": {"name": STREAM_NAMES[k]}}
              for k in range(streams)]
    for i, ins in enumerate(program.instrs):
        name = g.nodes[ins.target].name if ins.kind == COMPUTE else g.tensors[ins.target].name
        args = {"instruction": i, "deps": [int(d) for d in ins.deps]}
        if ins.kind == ALLREDUCE:
            args["bytes"] = int(sum(g.tensors[t].nbytes for t in ins.bucket))
        elif ins.kind != COMPUTE:
            args["bytes"] = int(g.tensors[ins.target].nbytes) if ins.copy else 0
        event = {"ph": "X", "pid": 0, "tid": ins.kind, "name": name,
                 "ts": start[i] * 1e6, "dur": (finish[i] - start[i]) * 1e6, "args": args}
        if ins.recompute:
            event.update(name=f"{RECOMPUTE} {name}", cat=RECOMPUTE)
        events.append(event)
    return events


def tenancies(program: Program, g: Graph, start: np.ndarray, finish: np.ndarray, total: float):
    """(object, tensor, from, to) arrays: each stay of a tensor in an object, from the start of
    the instruction that wrote it there to the finish of its last use there."""
    rows: list[list] = []           # [object, tensor, from, to]
    current: dict[int, list] = {}   # object -> its open row
    for t, o in program.initial_resident.items():
        current[o] = [o, t, 0.0, 0.0]
        rows.append(current[o])

    def use(o: int, t: int, i: int) -> None:
        row = current.get(o)
        if row is not None and row[1] == t:
            row[3] = max(row[3], finish[i])

    def write(o: int, t: int, i: int) -> None:
        row = current.get(o)
        if row is not None:
            row[3] = min(row[3], start[i])   # an in-place output takes its input's object here
        current[o] = [o, t, start[i], finish[i]]
        rows.append(current[o])

    for i, ins in enumerate(program.instrs):
        if ins.kind == COMPUTE:
            node = g.nodes[ins.target]
            k = len(node.inputs)
            for t, o in zip(node.inputs, ins.objects[:k]):
                use(o, t, i)
            for t, o in zip(node.outputs, ins.objects[k:]):
                write(o, t, i)
        elif ins.kind == SWAP_IN:
            write(ins.obj, ins.target, i)
        else:
            use(ins.obj, ins.target, i)
    # Resident state's objects stay taken into the next iteration.
    for o in set(program.initial_resident.values()):
        if o in current:
            current[o][3] = total
    if not rows:
        return (np.zeros(0, np.int64),) * 2 + (np.zeros(0),) * 2
    obj, tensor, frm, to = zip(*rows)
    return np.array(obj, np.int64), np.array(tensor, np.int64), np.array(frm), np.array(to)


def memory_counter(program: Program, g: Graph, start: np.ndarray, finish: np.ndarray, total: float) -> list[dict]:
    obj, tensor, frm, to = tenancies(program, g, start, finish, total)
    keep = to > frm
    obj, tensor, frm, to = obj[keep], tensor[keep], frm[keep], to[keep]
    nbytes = np.array([t.nbytes for t in g.tensors], dtype=np.int64)
    tenant = nbytes[tensor]
    slack = np.maximum(program.arena.object_bytes[obj] - tenant, 0) if len(obj) else tenant
    times, at = np.unique(np.concatenate([[0.0], frm, to, [total]]), return_inverse=True)
    n = len(frm)
    where_from, where_to = at[1:1 + n], at[1 + n:1 + 2 * n]

    def level(b: np.ndarray) -> np.ndarray:
        delta = np.bincount(where_from, b, len(times)) - np.bincount(where_to, b, len(times))
        return np.cumsum(delta)

    tenants, slacks = level(tenant), level(slack)
    scratch = int(program.arena.scratch_bytes)
    return [{"ph": "C", "pid": 0, "name": MEMORY_COUNTER, "ts": float(ts) * 1e6,
             "args": {"tensors": int(round(a)), "object slack": int(round(b)), "scratch": scratch}}
            for ts, a, b in zip(times, tenants, slacks)]


def dependency_flows(program: Program, start: np.ndarray, finish: np.ndarray) -> list[dict]:
    """A flow arrow (start 's' on the dependency's slice, finish 'f' on the waiting one) per
    edge between instructions on different streams. Each end sits mid-slice, so that it binds
    to that slice and not to a neighbour touching it."""
    middle = (np.asarray(start) + np.asarray(finish)) / 2 * 1e6
    events = []
    instrs = program.instrs
    for i, ins in enumerate(instrs):
        for d in ins.deps:
            src = instrs[d].kind
            if src == ins.kind:
                continue
            flow = {"cat": "dependency", "name": "waits for", "pid": 0, "id": len(events) // 2}
            events.append({**flow, "ph": "s", "tid": src, "ts": middle[d]})
            events.append({**flow, "ph": "f", "bp": "e", "tid": ins.kind, "ts": middle[i]})
    return events


def chrome_trace(program: Program, g: Graph, start: np.ndarray, finish: np.ndarray, total: float) -> dict:
    events = stream_slices(program, g, start, finish)
    events += memory_counter(program, g, start, finish, total)
    events += dependency_flows(program, start, finish)
    return {"traceEvents": events, "displayTimeUnit": "ms"}
