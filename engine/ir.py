"""The graph IR: one training iteration as a static dataflow graph.

Tensors and nodes have dense integer ids (their index in ``Graph.tensors`` and
``Graph.nodes``), so passes can work on numpy arrays indexed by id. Shapes,
dtypes and byte sizes are known when a node is added; no tensor data is ever
allocated here, so graphs of paper scale (hundreds of GB of tensors) build in
seconds.

The graph is in SSA form: every tensor has at most one producer. State that
persists across iterations (parameters, optimizer state, running statistics)
is a leaf tensor whose next value is another tensor, produced by an operator
that declares it (``Op.state_outputs``); ``Graph.state_pairs`` lists the pairs.
A parameter or state that no operator updates (the weights of a forward-only,
inference graph) is its own next value: it persists unchanged, so it may stay
resident across iterations and its host copy never goes stale.

Common expressions are built once: ``Graph.apply`` of a pure operator (``Op.recomputable``,
no state outputs) on the very inputs and attributes of a node already built returns that
node's outputs instead of adding a twin (MXNet's graph executor does the same to a forward
graph before building its gradient: ``MXNET_ELIMINATE_COMMON_EXPR``, on by default since 1.6,
src/executor/eliminate_common_expr.cc). NASNet's cells read the previous cell's output through
two ReLUs of the same input, as TF-slim writes it; one is built. ``Graph(common_expr=False)``
keeps every twin.

``Graph`` builds and answers queries; checking a whole graph or a schedule is
``engine.graph_check``, files and fingerprints are ``engine.graph_io``.
"""
from __future__ import annotations

import contextlib
import enum
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from ops import registry as op_registry
from ops.registry import OpError
from .errors import EngineError
from .units import MAX_BYTES, format_bytes


MAX_TENSORS = 2**20         # 30 times the largest zoo graph's (brnn-8-8k: 22642 tensors)


class GraphError(EngineError, ValueError):
    """A malformed graph; the message names the node or tensor at fault."""


class Kind(enum.IntEnum):
    INPUT = 0        # training data fed each iteration
    LABEL = 1        # integer targets fed each iteration
    PARAMETER = 2    # trained weights (and their next values)
    ACTIVATION = 3   # forward intermediate results
    GRADIENT = 4     # backward intermediate results
    STATE = 5        # optimizer state and running statistics (momentum, BN mean/var)


LEAF_KINDS = (Kind.INPUT, Kind.LABEL, Kind.PARAMETER, Kind.STATE)
PERSISTENT_KINDS = (Kind.PARAMETER, Kind.STATE)


@dataclass(slots=True)
class Tensor:
    id: int
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    kind: Kind
    nbytes: int
    init: str | None = None   # initializer name for leaf state (see engine.initializers)


@dataclass(slots=True)
class Node:
    id: int
    name: str
    op: str
    attrs: dict[str, Any]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass
class Summary:
    operators: int
    tensors: int
    distinct_sizes: int
    total_bytes: int
    bytes_by_kind: dict[str, int] = field(default_factory=dict)


def _frozen(value):
    """A hashable copy of canonical attributes (dicts, lists and arrays made tuples)."""
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    return value


def _spec_nbytes(shape, dtype) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


class Graph:
    """Builder and container. ``apply`` adds a node, inferring its outputs' shapes."""

    def __init__(self, name: str = "graph", common_expr: bool = True):
        self.name = name
        # (op, attributes, inputs, kind of its outputs) -> outputs of the pure node built for them
        self._exprs: dict[tuple, tuple[int, ...]] | None = {} if common_expr else None
        self.tensors: list[Tensor] = []
        self.nodes: list[Node] = []
        self.producer: list[int] = []          # tensor id -> node id, or -1 for a leaf
        self.users: list[list[int]] = []       # tensor id -> node ids reading it, in insertion order
        self._updates: list[tuple[int, int]] = []   # (current value, next value an operator writes)
        self._updated: set[int] = set()             # the current values in _updates, for a check per update
        self._pairs_key: tuple[int, int, int] | None = None
        self._pairs: list[tuple[int, int]] = []
        self.loss: int | None = None
        self.outputs: list[int] = []    # results read back after each iteration besides the loss (inference)
        self._tensor_names: dict[str, int] = {}
        self._node_names: dict[str, int] = {}
        self._default_kind = Kind.ACTIVATION
        self._prefix = ""
        # Values of leaves whose initializer is "imported" (an imported model's weights), by name.
        self.initial_values: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------ building
    def _new_tensor(self, name, shape, dtype, kind, init=None) -> int:
        if len(self.tensors) >= MAX_TENSORS:     # an LSTM of 2**62 steps was built on until memory ran out
            raise GraphError(f"graph '{self.name}' grows past {MAX_TENSORS} tensors (the paper's largest models "
                             "have tens of thousands); use fewer layers or steps, or a smaller size or batch")
        if name in self._tensor_names:
            raise GraphError(f"tensor name '{name}' is used twice")
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise GraphError(f"tensor '{name}' has a negative dimension in {shape}")
        dtype = np.dtype(dtype)
        nbytes = _spec_nbytes(shape, dtype)
        if nbytes > MAX_BYTES:          # past int64 where the planner sums sizes (an OverflowError)
            raise GraphError(f"tensor '{name}' of shape {shape} would hold {format_bytes(nbytes)}, more than any "
                             f"device holds ({format_bytes(MAX_BYTES)}); use a smaller batch, size or model")
        tid = len(self.tensors)
        self.tensors.append(Tensor(tid, name, shape, dtype, Kind(kind), nbytes, init))
        self.producer.append(-1)
        self.users.append([])
        self._tensor_names[name] = tid
        return tid

    def input(self, name: str, shape: Sequence[int], dtype="float32") -> int:
        return self._new_tensor(self._prefix + name, shape, dtype, Kind.INPUT)

    def label(self, name: str, shape: Sequence[int], dtype="int32") -> int:
        if np.dtype(dtype).kind not in "iu":
            raise GraphError(f"label '{name}' must have an integer dtype, got {np.dtype(dtype)}")
        return self._new_tensor(self._prefix + name, shape, dtype, Kind.LABEL)

    def parameter(self, name: str, shape: Sequence[int], dtype="float32", init: str = "he_normal") -> int:
        return self._new_tensor(self._prefix + name, shape, dtype, Kind.PARAMETER, init)

    def state(self, name: str, shape: Sequence[int], dtype="float32", init: str = "zeros") -> int:
        return self._new_tensor(self._prefix + name, shape, dtype, Kind.STATE, init)

    @contextlib.contextmanager
    def default_kind(self, kind: Kind):
        """Tensors produced inside this block get ``kind`` (autodiff uses GRADIENT)."""
        old, self._default_kind = self._default_kind, Kind(kind)
        try:
            yield
        finally:
            self._default_kind = old

    @contextlib.contextmanager
    def scope(self, prefix: str):
        """Prefix the names of nodes and leaf tensors created inside this block (``prefix/name``)."""
        old = self._prefix
        self._prefix = f"{old}{prefix}/"
        try:
            yield
        finally:
            self._prefix = old

    def _node_name(self, op: str, name: str | None) -> str:
        if name is None:
            base = f"{self._prefix}{op}"
            n = len(self._node_names)
            name = f"{base}_{n}"
            while name in self._node_names:
                n += 1
                name = f"{base}_{n}"
        else:
            name = self._prefix + name
        if name in self._node_names:
            raise GraphError(f"node name '{name}' is used twice")
        return name

    def apply(self, op: str, inputs: Iterable[int], name: str | None = None, **attrs) -> tuple[int, ...]:
        """Add a node applying ``op`` to tensor ids ``inputs``; return its output tensor ids."""
        inputs = tuple(int(t) for t in inputs)
        node_name = self._node_name(op, name)
        try:
            decl = op_registry.get(op)
            for t in inputs:
                if not 0 <= t < len(self.tensors):
                    raise OpError(f"input {t} is not a tensor of this graph")
            decl.check_arity(len(inputs))
            attrs = decl.canon(attrs)
            expr = self._expr_key(decl, op, attrs, inputs)
            built = None if expr is None else self._exprs.get(expr)
            if built is not None:
                return built                        # built already: the same values
            specs = decl.infer(attrs, [self.tensors[t] for t in inputs])
        except OpError as e:
            raise GraphError(f"node '{node_name}' ({op}): {e}") from None
        outputs = []
        for i, (shape, dtype) in enumerate(specs):
            kind = self._default_kind
            state_in = decl.state_outputs.get(i)
            if state_in is not None:
                kind = self.tensors[inputs[state_in]].kind
            suffix = "" if len(specs) == 1 else f":{i}"
            outputs.append(self._new_tensor(node_name + suffix, shape, dtype, kind))
        nid = len(self.nodes)
        self.nodes.append(Node(nid, node_name, op, attrs, inputs, tuple(outputs)))
        self._node_names[node_name] = nid
        for t in outputs:
            self.producer[t] = nid
        for t in dict.fromkeys(inputs):
            self.users[t].append(nid)
        for out_i, in_i in decl.state_outputs.items():
            cur = inputs[in_i]
            if self.tensors[cur].kind in PERSISTENT_KINDS and self.producer[cur] == -1:
                if cur in self._updated:
                    raise GraphError(f"node '{node_name}' ({op}): state '{self.tensors[cur].name}' "
                                     "already has a next value")
                self._updates.append((cur, outputs[out_i]))
                self._updated.add(cur)
        if expr is not None:
            self._exprs[expr] = tuple(outputs)
        return tuple(outputs)

    def _expr_key(self, decl, op: str, attrs: dict, inputs: tuple[int, ...]) -> tuple | None:
        """The key under which a pure node is built once (``common_expr``), or None: common
        expressions kept, or an operator whose outputs depend on more than its inputs."""
        if self._exprs is None or not decl.recomputable or decl.state_outputs:
            return None
        key = (op, _frozen(attrs), inputs, self._default_kind)
        try:
            hash(key)
        except TypeError:           # an attribute of a kind we cannot compare: built again, as before
            return None
        return key

    def set_loss(self, t: int) -> None:
        self.loss = int(t)

    def mark_output(self, t: int) -> None:
        """Read ``t`` back after each iteration (an inference graph's logits)."""
        if not 0 <= int(t) < len(self.tensors):
            raise GraphError(f"output {t} is not a tensor of this graph")
        if int(t) not in self.outputs:
            self.outputs.append(int(t))

    # ------------------------------------------------------------------ restoring (engine.graph_io)
    def restore_tensor(self, name: str, shape: Sequence[int], dtype, kind: Kind, init: str | None = None) -> int:
        """Add a tensor exactly as described (no scope prefix), for graphs read back from a file."""
        return self._new_tensor(name, shape, dtype, kind, init)

    def restore_node(self, name: str, op: str, attrs: dict[str, Any], inputs: Iterable[int],
                     outputs: Iterable[int]) -> int:
        """Add a node exactly as described, for graphs read back from a file: no shape rule runs
        and ids outside the graph are kept, for ``graph_check.validate`` to report."""
        nid = len(self.nodes)
        node = Node(nid, name, op, attrs, tuple(inputs), tuple(outputs))
        self.nodes.append(node)
        self._node_names[name] = nid
        for t in node.outputs:
            if 0 <= t < len(self.tensors):
                self.producer[t] = nid
        for t in dict.fromkeys(node.inputs):
            if 0 <= t < len(self.tensors):
                self.users[t].append(nid)
        return nid

    # ------------------------------------------------------------------ queries
    @property
    def state_pairs(self) -> list[tuple[int, int]]:
        """(current value, next value) of every persistent leaf: the updates operators write,
        in the order they were added, then each parameter or state nothing updates paired
        with itself (it persists unchanged; ``unchanged_state``)."""
        key = (len(self.tensors), len(self.nodes), len(self._updates))
        if self._pairs_key != key:
            updated = {c for c, _ in self._updates}
            self._pairs = self._updates + [(t, t) for t in self.leaves(*PERSISTENT_KINDS) if t not in updated]
            self._pairs_key = key
        return self._pairs

    def read_back(self) -> list[int]:
        """Tensors read after the iteration: the loss, then the outputs; kept to the end."""
        return ([self.loss] if self.loss is not None else []) + self.outputs

    @state_pairs.setter
    def state_pairs(self, pairs) -> None:     # graphs read back from a file (engine.graph_io)
        self._updates = [(int(c), int(x)) for c, x in pairs if int(c) != int(x)]
        self._updated = {c for c, _ in self._updates}
        self._pairs_key = None

    def shape(self, t: int) -> tuple[int, ...]:
        return self.tensors[t].shape

    def dtype(self, t: int) -> np.dtype:
        return self.tensors[t].dtype

    def tensor_id(self, name: str) -> int:
        try:
            return self._tensor_names[name]
        except KeyError:
            raise GraphError(f"no tensor named '{name}'") from None

    def node_id(self, name: str) -> int:
        try:
            return self._node_names[name]
        except KeyError:
            raise GraphError(f"no node named '{name}'") from None

    def leaves(self, *kinds: Kind) -> list[int]:
        return [t.id for t in self.tensors if self.producer[t.id] == -1 and (not kinds or t.kind in kinds)]

    def predecessors(self, nid: int) -> list[int]:
        """Nodes producing this node's inputs (each once, in input order)."""
        preds = (self.producer[t] for t in self.nodes[nid].inputs)
        return list(dict.fromkeys(p for p in preds if p >= 0))

    def successors(self, nid: int) -> list[int]:
        succ = (u for t in self.nodes[nid].outputs for u in self.users[t])
        return list(dict.fromkeys(succ))

    def default_order(self) -> list[int]:
        """Insertion order, which is topological for graphs built with ``apply``."""
        return list(range(len(self.nodes)))

    def summary(self) -> Summary:
        by_kind: dict[str, int] = {k.name.lower(): 0 for k in Kind}
        for t in self.tensors:
            by_kind[t.kind.name.lower()] += t.nbytes
        return Summary(
            operators=len(self.nodes),
            tensors=len(self.tensors),
            distinct_sizes=len({t.nbytes for t in self.tensors}),
            total_bytes=sum(t.nbytes for t in self.tensors),
            bytes_by_kind=by_kind,
        )

    def dump(self, limit: int | None = None) -> str:
        """A compact text listing: leaves, then one line per node."""
        def tdesc(t):
            x = self.tensors[t]
            dims = "x".join(str(d) for d in x.shape) or "scalar"
            return f"%{x.id}:{dims}"

        lines = [f"graph {self.name}: {len(self.nodes)} nodes, {len(self.tensors)} tensors"]
        for t in self.leaves():
            x = self.tensors[t]
            lines.append(f"  {x.kind.name.lower():10s} {tdesc(t)} {x.dtype} '{x.name}'")
        for n in self.nodes[:limit]:
            attrs = ", ".join(f"{k}={v}" for k, v in n.attrs.items())
            outs = ", ".join(tdesc(t) for t in n.outputs)
            ins = ", ".join(f"%{t}" for t in n.inputs)
            lines.append(f"  {outs} = {n.op}({ins}{'; ' + attrs if attrs else ''})  # {n.name}")
        if limit is not None and len(self.nodes) > limit:
            lines.append(f"  ... {len(self.nodes) - limit} more nodes")
        return "\n".join(lines)
