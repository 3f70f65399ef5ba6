"""TFLMS's view of a graph, shared by both versions (planner.policies.tflms, tflms_v2): which
operators are forward, backward or updates, their topological levels, and reachability.

IBM/tensorflow-large-model-support: TFLMS v1 (branch ``tflmsv1``) calls the optimizer's scope
the backward phase (``LMS._build_gradient_ops``) and levels the graph with ``topos.TOPOS``; v2
(master) levels the whole graph without cleaning (its ``topos.TOPOS.build``).
"""
from __future__ import annotations

from collections import deque

from engine.ir import Graph, Kind

NO_LEVEL = -1


class Phases:
    """Per node: backward (it makes a gradient: TFLMS's optimizer-scope ops), update (it only
    makes parameters and optimizer state: removed from the levels) or forward; its level as
    ``TOPOS`` gives it; and per tensor its reading nodes."""

    def __init__(self, g: Graph, order):
        n = len(g.nodes)
        kind = [[g.tensors[t].kind for t in node.outputs] for node in g.nodes]
        self.backward = [Kind.GRADIENT in k for k in kind]
        self.update = [not b and bool(k) and all(x in (Kind.PARAMETER, Kind.STATE) for x in k)
                       for b, k in zip(self.backward, kind)]
        self.forward = [not b and not u for b, u in zip(self.backward, self.update)]
        self.readers: list[list[int]] = [[] for _ in g.tensors]
        for node in g.nodes:
            for t in dict.fromkeys(node.inputs):
                self.readers[t].append(node.id)
        depth = [0] * n                       # toposort's layer: the longest path from a source
        for nid in order:
            depth[nid] = max((depth[g.producer[t]] + 1 for t in g.nodes[nid].inputs if g.producer[t] >= 0),
                             default=0)
        self.depth = depth                    # TFLMSv2's levels: toposort's, nothing removed
        kept = [not self.update[i] for i in range(n)]
        forward_levels = {depth[i] for i in range(n) if kept[i] and self.forward[i]}
        self.level = [NO_LEVEL if not kept[i] or (self.backward[i] and depth[i] in forward_levels) else depth[i]
                      for i in range(n)]
        # Updates are sinks and every level below a kept node holds one of its producers, so
        # removing them empties no level in the middle: TOPOS._reindex changes nothing here.
        self.bw_start = min((self.level[i] for i in range(n) if self.backward[i] and self.level[i] >= 0),
                            default=NO_LEVEL)
        self.by_level: dict[int, list[int]] = {}
        for i in range(n):
            if self.level[i] >= 0:
                self.by_level.setdefault(self.level[i], []).append(i)

    def consumers(self, g: Graph, nid: int) -> list[int]:
        return list(dict.fromkeys(c for t in g.nodes[nid].outputs for c in self.readers[t]))


def reaches(g: Graph, ph: Phases, src: int, dst: int) -> bool:
    """Whether a path leads from node ``src`` to node ``dst`` (depth grows along every edge: the
    walk stops at ``dst``'s depth)."""
    todo, seen, limit = deque([src]), {src}, ph.depth[dst]
    while todo:
        op = todo.popleft()
        if op == dst:
            return True
        for c in ph.consumers(g, op):
            if c not in seen and (c == dst or ph.depth[c] < limit):
                seen.add(c)
                todo.append(c)
    return False
