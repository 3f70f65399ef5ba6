"""Topological orders of a graph's nodes (schedules), and the edges every schedule keeps.

Besides its data edges, a schedule keeps write-after-read edges: a node that may write
an output over one of its inputs (``Op.inplace``: an SGD update, a batch norm's
running statistics, a gradient accumulation) runs after every other reader of that
input, so the in-place write is always possible. The planner would be correct without
them (it then gives the output an object of its own), but schedules that break them
need more memory for nothing. The genetic search (ga/context.py) keeps them too. Only
writes that some order can take impose them (``write_after_read_edges``), so the edges
never cycle with the data edges.
"""
from __future__ import annotations

import heapq
from typing import Any, Callable, Sequence

import numpy as np

from .inplace import InPlace
from .ir import Graph, GraphError, Kind
from .liveness import kept_mask


def write_after_read_edges(g: Graph) -> list[tuple[int, int]]:
    """(reader, updater) for every node reading a value that another node may write over, for
    the in-place writes some order can take (``engine.inplace``): eligible (the node reads the
    input once and it has the output's size), the input not kept past the iteration, and no
    reader of the input needing the updater's output (``c = a + accumulate(a, y)``: ``c`` must
    run after the update, so ``a`` never dies there). Writes are taken in node order and one
    whose edges would close a cycle with the data edges and the edges kept so far (two updates
    each of whose input is read by a descendant of the other) keeps none: every order still
    honours one of them, and a schedule always exists (the graph's own order among them)."""
    decl = InPlace.of(g)
    kept = kept_mask(g)
    writes = []                          # (updater, its input's other readers), in node order
    for node, src, ok in zip(decl.node.tolist(), decl.src.tolist(), decl.eligible.tolist()):
        readers = list(dict.fromkeys(r for r in g.users[src] if r != node))
        if ok and not kept[src] and readers:
            writes.append((node, readers))
    successors = [list(dict.fromkeys(g.successors(n))) for n in range(len(g.nodes))]
    every = [list(s) for s in successors]
    for u, readers in writes:
        for r in readers:
            every[r].append(u)
    ready: list[int] = []
    if len(kahn_order(every, in_degrees(every), ready.append, ready.pop)) == len(g.nodes):
        return [(r, u) for u, readers in writes for r in readers]      # no cycle: every write
    edges = []
    for u, readers in writes:
        if _reaches(successors, u, set(readers)):
            continue
        for r in readers:
            successors[r].append(u)
            edges.append((r, u))
    return edges


def _reaches(successors: Sequence[Sequence[int]], start: int, targets: set) -> bool:
    """Whether some node of ``targets`` can be reached from ``start`` along ``successors``."""
    seen, stack = {start}, [start]
    while stack:
        for s in successors[stack.pop()]:
            if s in targets:
                return True
            if s not in seen:
                seen.add(s)
                stack.append(s)
    return False


def schedule_successors(g: Graph) -> list[list[int]]:
    """Per node, the nodes that must run after it: data edges plus write-after-read edges."""
    successors = [list(g.successors(n)) for n in range(len(g.nodes))]
    for reader, update in write_after_read_edges(g):
        if update not in successors[reader]:
            successors[reader].append(update)
    return successors


def in_degrees(successors: Sequence[Sequence[int]]) -> list[int]:
    """Per node, how many successor lists name it (its predecessors, when each list names a
    successor once)."""
    indeg = [0] * len(successors)
    for succ in successors:
        for s in succ:
            indeg[s] += 1
    return indeg


def kahn_order(successors: Sequence[Sequence[int]], pending: list[int], push: Callable[[int], Any],
               pop: Callable[[], int]) -> list[int]:
    """Kahn's algorithm over successor lists, the ready set the caller's: every node whose
    ``pending`` count (its unrun predecessors; consumed) is 0 is ``push``ed, in ascending order
    at first, then as its last predecessor runs; ``pop`` removes and returns the node to run
    next. The order misses some nodes exactly when the edges have a cycle."""
    ready = 0
    for n, d in enumerate(pending):
        if d == 0:
            push(n)
            ready += 1
    order = []
    while ready:
        n = pop()
        ready -= 1
        order.append(n)
        for s in successors[n]:
            pending[s] -= 1
            if pending[s] == 0:
                push(s)
                ready += 1
    return order


def _schedule(g: Graph, push, pop) -> list[int]:
    succ = schedule_successors(g)
    order = kahn_order(succ, in_degrees(succ), push, pop)
    if len(order) != len(g.nodes):
        raise GraphError("the write-after-read edges of in-place updates form a cycle with the data edges")
    return order


def random_order(g: Graph, rng: np.random.Generator) -> list[int]:
    """A uniformly random choice among ready nodes at every step: a random topological order."""
    ready: list[int] = []

    def pop() -> int:
        i = int(rng.integers(len(ready)))
        ready[i], ready[-1] = ready[-1], ready[i]
        return ready.pop()
    return _schedule(g, ready.append, pop)


def updates_when_ready(g: Graph, kinds: Sequence[Kind] = (Kind.PARAMETER,)) -> list[int]:
    """Insertion order, except that each update of a persistent tensor of ``kinds`` (the node
    writing its next value) runs as soon as it can: after its gradient is complete and every
    other read of the tensor. Insertion order leaves every update after the whole backward
    pass. With every persistent kind, a gradient accumulator's add also runs as soon as its
    gradient is ready, as an eager framework's autograd accumulates into ``.grad``."""
    update = set()
    for cur, nxt in g.state_pairs:
        if g.tensors[cur].kind in kinds and g.producer[nxt] >= 0:
            update.add(g.producer[nxt])
    return priority_order(g, [-1 if n in update else n for n in range(len(g.nodes))])


def priority_order(g: Graph, priority) -> list[int]:
    """The topological order that always runs the ready node of smallest ``priority[node]``."""
    heap: list[tuple[Any, int]] = []
    return _schedule(g, lambda n: heapq.heappush(heap, (priority[n], n)), lambda: heapq.heappop(heap)[1])


# MXNet sums a gradient's contributions with one ElementWiseSum below this many, with a chain of
# in-place adds from it on (graph_executor.cc, AggregateGradient: MXNET_EXEC_INPLACE_GRAD_SUM_CAP).
MXNET_INPLACE_SUM_CAP = 8


def mxnet_order(g: Graph) -> list[int]:
    """The schedule MXNet's graph executor runs a training graph in (SwapAdvisor's "default
    schedule": the order of its baselines and of its allocation-only search).

    Derived from MXNet 1.x's source: ``GraphExecutor::InitFullGraph``
    (src/executor/graph_executor.cc) makes the full graph's outputs the forward outputs, then the
    gradient of every argument in ``Symbol::ListInputs(kReadOnlyArgs)`` order (the order a
    depth-first walk from the outputs meets the variables); the schedule is that graph's
    ``nnvm::IndexedGraph`` (nnvm src/core/graph.cc, its constructor), whose node ids are
    ``DFSVisit(g.outputs, ...)`` (nnvm include/nnvm/graph.h, ``PostOrderDFSVisit``: each node's
    inputs in their order, then its control dependencies): a post-order depth-first walk. So the
    whole forward pass comes first (walked from the loss), then each parameter's gradient walked
    in argument order. MXNet runs the optimizer outside the graph, after the backward pass
    (``Module.update``), parameter after parameter: so do the updates here, in argument order.

    The backward nodes are ours (engine.autodiff), with two of MXNet's rules put back: the nodes
    one operator's gradient emits (named ``<node>.grad/...``) are placed together, as MXNet's one
    ``_backward_<op>`` node (so a fully connected layer's weight gradient is made with its data
    gradient, not left for the walk from the weight); and a gradient of ``MXNET_INPLACE_SUM_CAP``
    or more contributions gets AggregateGradient's control dependencies (each contribution after
    the sum of the ones before it), so an unrolled RNN's weight gradients are summed step by step.
    The write-after-read edges (``write_after_read_edges``) are visited as control dependencies
    too, so the order is a schedule like any other (checked before it is returned).

    On an unrolled RNN whose loss sums every step's output, the walk from the loss reaches step
    0 of every layer before step 1 of any: the layers interleave, which is what made the paper's
    ODSwap and its allocation-only search collapse on RNN-8-8K and BRNN-4-8K (its Figures 6, 10)."""
    n = len(g.nodes)
    unit = list(range(n))                                     # node -> the node standing for its group
    members: dict[int, list[int]] = {}
    first_of: dict[str, int] = {}
    for node in g.nodes:
        cut = node.name.rfind(".grad/")
        if cut > 0:
            head = first_of.setdefault(node.name[:cut], node.id)
            unit[node.id] = head
            members.setdefault(head, []).append(node.id)
    control: list[list[int]] = [[] for _ in range(n)]         # node -> nodes to run before it, after its inputs
    for reader, update in write_after_read_edges(g):
        control[update].append(reader)
    for reader, before in _mxnet_sum_dependencies(g):
        control[reader].append(before)
    placed = [False] * n
    order: list[int] = []
    params_met: list[int] = []                                # parameters in the order the walk meets them
    seen_params: set[int] = set()

    def children(u: int):
        """A unit's inputs in their order, then its control dependencies, as the walk meets them:
        a parameter (a variable node to nnvm, without inputs) is met when the walk reaches it."""
        group = members.get(u, [u])
        for m in group:
            for t in g.nodes[m].inputs:
                p = g.producer[t]
                if p >= 0:
                    if unit[p] != u:
                        yield unit[p]
                elif g.tensors[t].kind is Kind.PARAMETER and t not in seen_params:
                    seen_params.add(t)
                    params_met.append(t)
        for m in group:
            for c in control[m]:
                if unit[c] != u:
                    yield unit[c]

    def walk(root: int) -> None:
        """Post-order from ``root`` (iterative: graphs have tens of thousands of nodes); a
        control dependency that would close a cycle is dropped, as nnvm asserts none does."""
        root = unit[root]
        if placed[root]:
            return
        on_path = {root}
        stack = [(root, children(root))]
        while stack:
            u, pending = stack[-1]
            for c in pending:
                if not placed[c] and c not in on_path:
                    on_path.add(c)
                    stack.append((c, children(c)))
                    break
            else:
                stack.pop()
                on_path.discard(u)
                placed[u] = True
                order.extend(members.get(u, [u]))

    for t in g.read_back():                                   # the forward outputs
        if g.producer[t] >= 0:
            walk(g.producer[t])
    updates = {cur: g.producer[nxt] for cur, nxt in g.state_pairs if cur != nxt and g.producer[nxt] >= 0}
    params = params_met + [p for p in g.leaves(Kind.PARAMETER) if p not in seen_params]
    for p in params:                                          # each argument's gradient, in argument order
        if p in updates:
            for t in g.nodes[updates[p]].inputs:
                if g.producer[t] >= 0:
                    walk(g.producer[t])
    for p in params:                                          # the optimizer, after the backward pass
        if p in updates:
            walk(updates[p])
    for node in range(n):                                     # anything else (other state's updates)
        walk(node)
    _check_schedule(g, order)
    return order


def _mxnet_sum_dependencies(g: Graph) -> list[tuple[int, int]]:
    """(node, node it must follow) for AggregateGradient's chain of in-place adds: the producer
    of each contribution after the sum of the contributions before it (after the first
    contribution, for the second), for gradients of ``MXNET_INPLACE_SUM_CAP`` or more. Our
    autodiff sums contributions as ``sum_n(g1, g2)`` then ``accumulate(sum, g_k)``."""
    chains: dict[int, list[tuple[int, int]]] = {}            # sum_n node -> [(reader, before)]
    head_of: dict[int, int] = {}                             # running-sum tensor -> its chain's sum_n node
    for node in g.nodes:
        if node.op == "sum_n" and node.name.endswith(".grad_sum") and len(node.inputs) == 2:
            first, second = (g.producer[t] for t in node.inputs)
            chains[node.id] = [(second, first)] if first >= 0 and second >= 0 and first != second else []
            head_of[node.outputs[0]] = node.id
        elif node.op == "accumulate" and ".grad_acc" in node.name and node.inputs[0] in head_of:
            head = head_of[node.inputs[0]]
            running, contribution = node.inputs
            if g.producer[contribution] >= 0:
                chains[head].append((g.producer[contribution], g.producer[running]))
            head_of[node.outputs[0]] = head
    return [dep for deps in chains.values() if len(deps) + 1 >= MXNET_INPLACE_SUM_CAP for dep in deps]


def _check_schedule(g: Graph, order: list[int]) -> None:
    """Raise unless ``order`` runs every node once, after its data and write-after-read predecessors."""
    position = {node: i for i, node in enumerate(order)}
    if len(position) != len(g.nodes) or len(order) != len(g.nodes):
        raise GraphError(f"not a schedule of '{g.name}': {len(position)} distinct nodes of {len(g.nodes)}")
    for node, succ in enumerate(schedule_successors(g)):
        for s in succ:
            if position[s] < position[node]:
                raise GraphError(f"not a schedule of '{g.name}': '{g.nodes[s].name}' before "
                                 f"'{g.nodes[node].name}', which it depends on")
