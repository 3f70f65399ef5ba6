"""``full_recompute``: Megatron-LM's full activation recomputation (``--recompute-granularity
full``, one layer per checkpoint), SmartSwap's baseline (004 Section 6.1).

Each transformer layer (``engine.layer_scopes``: the nodes named ``block<i>/``) keeps only its
input through the forward pass: every tensor the layer's own forward nodes make and only the
layer reads is freed after its last forward read, and the whole layer's forward is run again
(recomputations, in forward order) just before the first backward step that reads one of them.
Unlike ``checkpoint``, which drops only what the budget forces, this recomputes every layer
whatever memory is left: the baseline costs about one more forward pass, as Megatron's does.

Nothing is swapped: parameters and optimizer state stay resident (the double pass of
``planner.online_program.settle`` places them first), the batch is copied in where first read,
and every tensor is placed by the online allocator (PyTorch's caching best fit unless the request
names another). A node is dropped and recomputed when it may be (``engine.recompute``), none of
its outputs is kept past the iteration, and only its own layer reads them; others keep their
outputs as usual. A graph without layer scopes is refused: there is nothing to checkpoint.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from allocator.registry import ONLINE
from engine.inplace import InPlace
from engine.layer_scopes import PREFIX, layer_of_nodes
from engine.recompute import recomputable
from engine.units import format_bytes

from ..errors import OutOfRoom, PlanError
from ..online_program import NOT_HOST, OnlineProgram, online_allocator, persistent_state, settle
from ..policy import PlanRequest, Policy, register
from ..smartswap.layers import FORWARD, phases
from ..swap_planner import GraphArrays

NAME = "full_recompute"


def recomputed_steps(g, order) -> list[tuple[int, bool]]:
    """The order with each layer's recomputation inserted: (node, whether a recomputation), a
    layer's droppable forward nodes again, in forward order, before the first later step that
    reads one of their outputs. PlanError if no node of ``order`` lies in a layer."""
    layer = layer_of_nodes(g)
    if not (layer[np.asarray(order, dtype=np.int64)] >= 0).any():
        raise PlanError(f"{NAME}: graph '{g.name}' has no layers (nodes named {PREFIX}<i>/, as the zoo's GPT and "
                        "Llama build them); full recomputation checkpoints each layer's input")
    phase = phases(g, order)
    kept = GraphArrays.of(g).kept
    dropped: dict[int, list[int]] = defaultdict(list)     # layer -> droppable forward nodes, in order
    dropped_tensors: dict[int, int] = {}                  # tensor -> its layer
    for step, nid in enumerate(order):
        L = int(layer[nid])
        node = g.nodes[nid]
        if L < 0 or phase[step] != FORWARD or not recomputable(node):
            continue
        if all(not kept[t] and all(layer[u] == L for u in g.users[t]) for t in node.outputs):
            dropped[L].append(nid)
            dropped_tensors.update((t, L) for t in node.outputs)
    steps: list[tuple[int, bool]] = []
    done: set[int] = set()
    for step, nid in enumerate(order):
        if phase[step] != FORWARD:
            for t in g.nodes[nid].inputs:
                L = dropped_tensors.get(t)
                if L is not None and L not in done:
                    done.add(L)
                    steps.extend((r, True) for r in dropped[L])
        steps.append((int(nid), False))
    return steps


class _Events:
    """Per tensor, its uses along the recomputed steps: whether it dies after a read (its last
    use, or the next is a recomputation making it again), and outputs nothing reads after."""

    def __init__(self, g, steps):
        uses: dict[int, list[tuple[int, bool]]] = defaultdict(list)     # tensor -> (position, is a write)
        for pos, (nid, _) in enumerate(steps):
            node = g.nodes[nid]
            for t in dict.fromkeys(node.inputs):
                uses[t].append((pos, False))
            for t in node.outputs:
                uses[t].append((pos, True))
        self.dies_at: dict[tuple[int, int], bool] = {}
        for t, us in uses.items():
            for k, (pos, write) in enumerate(us):
                self.dies_at[(t, pos)] = k + 1 == len(us) or us[k + 1][1]

    def dies(self, t: int, pos: int) -> bool:
        return self.dies_at[(t, pos)]


def _in_place_rows(g) -> dict[int, list[tuple[int, int]]]:
    """Per node: (output index, input tensor) of each write the kernel may do in place and
    that no order changes (``InPlace.eligible``)."""
    ip = InPlace.of(g)
    rows: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for node, k, src, ok in zip(ip.node.tolist(), ip.out_index.tolist(), ip.src.tolist(), ip.eligible.tolist()):
        if ok:
            rows[node].append((k, src))
    return rows


def _one_pass(request: PlanRequest, steps, events: _Events, in_place, resident) -> OnlineProgram:
    g, budget = request.graph, request.budget
    kept = GraphArrays.of(g).kept
    out = OnlineProgram(g, online_allocator(request), budget.scratch_bytes, request.facts.order, NAME, resident)

    def place(t: int, nid: int) -> int:
        o = out.place(t)
        if o is None:
            raise OutOfRoom(f"{NAME}: '{g.tensors[t].name}' ({format_bytes(out.nbytes[t])}) finds no room for "
                            f"'{g.nodes[nid].name}' in a pool of {format_bytes(budget.pool_bytes)} with allocator "
                            f"'{out.alloc.name}'; give more --memory")
        return o

    for pos, (nid, again) in enumerate(steps):
        node = g.nodes[nid]
        ins = list(dict.fromkeys(node.inputs))
        for t in ins:
            if out.obj_of[t] < 0:
                if out.host_writer[t] == NOT_HOST:
                    raise PlanError(f"{NAME}: '{g.tensors[t].name}' is gone before '{node.name}' reads it "
                                    "(planner bug)")
                out.swap_in(t, place(t, nid))
        dying = [t for t in ins if events.dies(t, pos) and not kept[t]]
        taken = {}
        for k, src in in_place.get(nid, ()):
            if src in dying and src not in taken.values():
                taken[k] = src
        out_objs = [out.obj_of[taken[k]] if k in taken else place(t, nid) for k, t in enumerate(node.outputs)]
        out.compute(pos, nid, out_objs, recompute=again)
        for t in dying:
            if t not in taken.values():
                out.drop(t)
        for t in node.outputs:
            if events.dies(t, pos) and not kept[t]:
                out.drop(t)
    return out


def make(request: PlanRequest):
    g = request.graph
    steps = recomputed_steps(g, request.facts.order)
    events, in_place = _Events(g, steps), _in_place_rows(g)

    def one_pass(resident):
        out = _one_pass(request, steps, events, in_place, resident)
        return out, out.leave_state()
    return settle(one_pass, persistent_state(g), NAME)


POLICY = register(Policy(NAME, "Megatron's full recomputation: each layer keeps its input, its forward run again "
                         "in the backward pass; state resident, nothing swapped", make, kinds=(ONLINE,)))
