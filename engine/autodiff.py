"""Reverse-mode autodiff: extend a forward graph with its backward and update operators.

Backward computations are ordinary operators emitted by each operator's
``gradient`` declaration, so the planner and executor treat them like forward
ones. Contributions to one tensor's gradient are summed in the order in which
they were emitted (reverse insertion order of the consumers): fixed for a given
graph, whatever schedule later runs it. The first two make a running sum
(``sum_n``), and each later one is added into it as soon as it is emitted
(``accumulate``, which writes over the running sum, MXNet's gradient "add-to"),
so the bits are those of one left-to-right n-ary sum, yet each contribution
dies right after it is made and the sum takes one object however many there
are. (An unrolled RNN's weight gets one contribution of 1 GiB per time step:
as operands of one node, 35 would not fit a 16 GiB device; as a chain of
fresh sums they would keep three such objects busy and force swaps.)
"""
from __future__ import annotations

from dataclasses import dataclass

from ops import registry as op_registry
from ops.registry import OpError

from .collector import collector_held
from .graph_check import validate
from .ir import Graph, GraphError, Kind


@dataclass(frozen=True)
class SGD:
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 1e-4

    def update(self, g: Graph, p: int, gp: int) -> None:
        """One momentum state tensor per parameter, and its sgd_update."""
        name = g.tensors[p].name
        m = g.state(f"{name}.momentum", g.shape(p), g.dtype(p), init="zeros")
        g.apply("sgd_update", [p, gp, m], name=f"{name}.update",
                lr=self.lr, momentum=self.momentum, weight_decay=self.weight_decay)


@dataclass(frozen=True)
class Adam:
    """Adam, or AdamW (``decoupled``: weight decay applied to the weights, not the gradient)."""
    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 1e-4
    decoupled: bool = True

    def update(self, g: Graph, p: int, gp: int) -> None:
        """Two moment state tensors the parameter's size and a scalar step count, and adam_update."""
        name, shape, dt = g.tensors[p].name, g.shape(p), g.dtype(p)
        m = g.state(f"{name}.adam_m", shape, dt, init="zeros")
        v = g.state(f"{name}.adam_v", shape, dt, init="zeros")
        step = g.state(f"{name}.adam_step", (), dt, init="zeros")
        g.apply("adam_update", [p, gp, m, v, step], name=f"{name}.update", lr=self.lr, beta1=self.beta1,
                beta2=self.beta2, eps=self.eps, weight_decay=self.weight_decay, decoupled=self.decoupled)


OPTIMIZERS = ("sgd", "adam", "adamw")


def make_optimizer(name: str, lr: float | None = None, momentum: float = 0.9,
                   weight_decay: float = 1e-4) -> SGD | Adam:
    """The optimizer called ``name`` (one of OPTIMIZERS); ``lr`` None: its own default
    (0.05 for SGD, 1e-3 for Adam). ``momentum`` is SGD's only."""
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer '{name}' (choose from {', '.join(OPTIMIZERS)})")
    if name == "sgd":
        return SGD(SGD.lr if lr is None else lr, momentum, weight_decay)
    return Adam(lr=Adam.lr if lr is None else lr, weight_decay=weight_decay, decoupled=name == "adamw")


def gradients(g: Graph, loss: int) -> dict[int, int]:
    """Append the backward pass of scalar ``loss``; return {parameter id: gradient id}."""
    lt = g.tensors[loss]
    if lt.shape != ():
        where = g.producer[loss]
        by = f" (output of node '{g.nodes[where].name}')" if where >= 0 else ""
        raise GraphError(f"cannot take the gradient of '{lt.name}'{by}: its shape is {lt.shape}, "
                         "not a scalar; reduce it to a scalar loss first")
    n_forward = len(g.nodes)
    params = g.leaves(Kind.PARAMETER)

    # Tensors that depend on a parameter through differentiable operators...
    needs = [False] * len(g.tensors)
    for p in params:
        needs[p] = True
    for n in g.nodes:
        if any(needs[t] for t in n.inputs) and op_registry.get(n.op).differentiable:
            for t in n.outputs:
                needs[t] = True
    # ...and on which the loss depends.
    reaches = [False] * len(g.tensors)
    reaches[loss] = True
    for n in reversed(g.nodes):
        if any(reaches[t] for t in n.outputs):
            for t in n.inputs:
                reaches[t] = True
    wanted = [a and b for a, b in zip(needs, reaches)]

    first: dict[int, int] = {}          # tensor -> its only contribution so far
    running: dict[int, int] = {}        # tensor -> the running sum of its contributions
    added: dict[int, int] = {}          # tensor -> contributions accumulated into the sum

    def contribute(t: int, gt: int) -> None:
        name = g.tensors[t].name
        if t in running:
            k = added[t] = added[t] + 1
            (running[t],) = g.apply("accumulate", [running[t], gt], name=f"{name}.grad_acc{k}")
        elif t in first:
            (running[t],) = g.apply("sum_n", [first.pop(t), gt], name=f"{name}.grad_sum")
            added[t] = 2
        else:
            first[t] = gt

    def total(t: int) -> int | None:
        return running.get(t, first.get(t))

    with g.default_kind(Kind.GRADIENT):
        (seed,) = g.apply("fill", [], name=f"{lt.name}.grad_seed", shape=(), dtype=lt.dtype.name, value=1.0)
        contribute(loss, seed)
        for node in reversed(g.nodes[:n_forward]):
            want = [wanted[t] for t in node.inputs]
            if not any(want) or all(total(t) is None for t in node.outputs):
                continue
            decl = op_registry.get(node.op)
            if not decl.differentiable:
                raise GraphError(f"node '{node.name}' ({node.op}): the loss depends on a parameter "
                                 "through it, but the operator has no gradient")
            dys = [total(t) for t in node.outputs]
            try:
                with g.scope(f"{node.name}.grad"):
                    grads = decl.gradient(g, node, dys, want)
            except OpError as e:
                raise GraphError(f"node '{node.name}' ({node.op}): {e}") from None
            for t, gt, w in zip(node.inputs, grads, want):
                if w and gt is not None:
                    contribute(t, gt)
        result = {}
        for p in params:
            gp = total(p)
            if gp is None:
                raise GraphError(f"parameter '{g.tensors[p].name}' does not affect the loss "
                                 f"'{lt.name}'; remove it or use it")
            result[p] = gp
    return result


def build_training_graph(g: Graph, loss: int, optimizer: SGD | Adam = SGD()) -> Graph:
    """Turn a forward graph ending in scalar ``loss`` into a whole iteration, in place:
    forward, backward, then one optimizer update per parameter (SGD with momentum, or Adam).
    With the cyclic collector held off (``engine.collector``): the nodes and tensors it makes
    would otherwise start full collections over everything the process holds."""
    with collector_held():
        g.set_loss(loss)
        grads = gradients(g, loss)
        for p, gp in grads.items():
            optimizer.update(g, p, gp)
        validate(g)
    return g
