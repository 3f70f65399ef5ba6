"""The Program of a set of stays: each stay is one object of the online allocator
(``planner.online_program``), asked for and given back in step order; its reuse edges make the
first write into reused bytes wait for everything that used them, the swap-out at a release
point included, so the Program verifies whatever the real copy times (release points only
decide how early bytes are reused)."""
from __future__ import annotations

from engine.ir import Graph
from engine.program import Program

from ..errors import PlanError
from ..online_program import OnlineProgram
from .candidates import root_map
from .stays import Stay

NAME = "smartswap"


def build_program(g: Graph, order: list[int], lifetimes, scratch_bytes: int, stays: list[Stay],
                  alloc) -> Program | None:
    """Walk the steps placing each stay with ``alloc`` and emit the instructions; None if a
    stay finds no room."""
    n = len(order)
    resident = [st.storage.root for st in stays if st.start < 0]
    try:
        op = OnlineProgram(g, alloc, scratch_bytes, order, NAME, resident)
    except PlanError:
        return None
    starts: dict[int, list[Stay]] = {}
    outs: dict[int, list[Stay]] = {}
    frees: dict[int, list[Stay]] = {}
    for st in sorted(stays, key=lambda st: st.first_use):   # at one step, the most urgent copy first
        if st.start >= 0:
            starts.setdefault(st.start, []).append(st)
        if st.out_after is not None:
            outs.setdefault(st.out_after, []).append(st)
        frees.setdefault(st.free_after, []).append(st)
    holds: dict[int, int] = {r: r for r in resident}   # storage root -> the tensor it holds now
    root_of = root_map(g, lifetimes)
    for step in range(n):
        for st in frees.pop(step - 1, []):
            op.drop(holds.pop(st.storage.root))
        for st in starts.get(step, []):
            if st.swap_in is not None:
                o = op.place(st.swap_in)
                if o is None:
                    return None
                op.swap_in(st.swap_in, o)
                holds[st.storage.root] = st.swap_in
        node = g.nodes[order[step]]
        out_objs = []
        for t in node.outputs:
            r = int(root_of[t])
            if r != t:                           # written over its storage's input, in place
                out_objs.append(op.obj_of[holds[r]])
            else:
                o = op.place(t)
                if o is None:
                    return None
                out_objs.append(o)
        starts.pop(step, None)
        op.compute(step, node.id, out_objs)
        for t in node.outputs:
            holds[int(root_of[t])] = t
        for t in node.inputs:
            holds.setdefault(int(root_of[t]), t)
        for st in outs.pop(step, []):
            if st.copy_out:
                op.write_back(holds[st.storage.root])
    if op.leave_state():
        raise PlanError(f"smartswap: resident state strayed from its home in '{g.name}' (planner bug)")
    return op.program()
