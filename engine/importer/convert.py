"""An ExportedProgram, decomposed to Core ATen, as our forward graph and the values of its leaves.

Walk the FX graph once, in its (topological) order:

- placeholders become leaves: a trained parameter a PARAMETER, a buffer STATE (persisted; the
  running statistics batch norm updates get their next values from our batch_norm_stats),
  a user input an INPUT, or a LABEL when the loss reads it as its target; lifted constants
  and non-persistent buffers are constants;
- a node all of whose inputs are constants is evaluated here, with torch, once (an arange,
  a causal mask, a RoPE table): a constant. A constant that a kept node reads becomes a
  STATE leaf nothing updates, its value stored with the weights;
- every other node goes through its converter (``engine.importer.aten``), which emits our
  operators; an operator without one is refused, naming it, the node and the source line;
- nodes nothing kept reads (``num_batches_tracked`` counters, unused outputs) are left out.

Shapes are static: a symbolic size anywhere is refused.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelImportError
from ..initializers import IMPORTED
from ..ir import Graph, GraphError

FLOAT_DTYPES = ("float32", "float64")


@dataclass
class Const:
    """A value known at import time (a torch tensor, or a Python number)."""
    value: object


@dataclass
class Unusable:
    """An output the importer does not provide (max pooling's indices): reading it is refused."""
    what: str


@dataclass
class LazyTranspose:
    """A permute that swaps the last two axes, kept unmaterialised so a matrix product can read
    its source with a transpose flag; ``Converter.tensor`` materialises it for any other reader."""
    source: int
    axes: tuple[int, ...]
    materialised: int | None = None


@dataclass
class Converter:
    """State of one import: our graph, leaf values, and each FX node's value (a tensor id,
    a tuple of them, a Const, an Unusable or a LazyTranspose)."""
    g: Graph
    values: dict[str, np.ndarray] = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    node: object = None               # the FX node being converted (for messages)
    _named_once: bool = False         # whether an operator was named after ``node`` yet
    _const_tensors: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def begin(self, node) -> None:
        """Convert ``node`` next: the first operator it emits is named after it."""
        self.node, self._named_once = node, False

    # ------------------------------------------------------------------ reading arguments
    def tensor(self, arg) -> int:
        """Our tensor id for an FX argument (a node), materialising constants and lazy transposes."""
        v = self.env[arg] if _is_node(arg) else Const(arg)
        if isinstance(v, int):
            return v
        if isinstance(v, LazyTranspose):
            if v.materialised is None:
                (v.materialised,) = self.g.apply("transpose", [v.source], name=f"{arg.name}", axes=v.axes)
            return v.materialised
        if isinstance(v, Const):
            return self._constant_leaf(arg, v.value)
        if isinstance(v, Unusable):
            raise self.refuse(f"it reads {v.what}, which the importer does not provide")
        raise self.refuse(f"it reads a value of kind {type(v).__name__} where a tensor is needed")

    def value(self, arg):
        """The converted value of an argument: a node's entry in env, or a literal as is."""
        if _is_node(arg):
            return self.env[arg]
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.value(a) for a in arg)
        return arg

    def matrix(self, arg) -> tuple[int, bool]:
        """(tensor, transposed) for a matrix product's operand: a lazy transpose of the last two
        axes is read as its source with the transpose flag, never copied."""
        v = self.env.get(arg) if _is_node(arg) else None
        if isinstance(v, LazyTranspose) and v.materialised is None:
            return v.source, True
        return self.tensor(arg), False

    def const_value(self, arg):
        """The import-time value of an argument, or None when it is computed from the inputs."""
        v = self.env[arg] if _is_node(arg) else Const(arg)
        return v.value if isinstance(v, Const) else None

    def shape(self, arg=None) -> tuple[int, ...]:
        """The static shape FX recorded for a node (default: the node being converted)."""
        n = self.node if arg is None else arg
        return tuple(int(d) for d in n.meta["val"].shape)

    def dtype(self, arg=None) -> str:
        n = self.node if arg is None else arg
        return str(n.meta["val"].dtype).replace("torch.", "")

    # ------------------------------------------------------------------ emitting
    def apply(self, op: str, inputs, outputs: int | None = None, **attrs):
        """Apply our ``op``; one output's id, or the tuple when the op has several."""
        name = self.node.name if not self._named_once else None
        self._named_once = True
        try:
            outs = self.g.apply(op, inputs, name=name, **attrs)
        except GraphError as e:
            raise self.refuse(f"our operator {op} rejects it: {e}") from None
        return outs[0] if len(outs) == 1 else outs

    def refuse(self, why: str) -> ModelImportError:
        return ModelImportError(f"cannot import node '{self.node.name}' ({target_name(self.node)}){where(self.node)}: "
                                f"{why}")

    def _constant_leaf(self, arg, value) -> int:
        key = arg.name if _is_node(arg) else repr(value)
        if key in self._const_tensors:
            return self._const_tensors[key]
        a = to_numpy(value, f"constant {key}")
        name = f"const/{key}"
        t = self.g.state(name, a.shape, a.dtype, init=IMPORTED)
        self.values[name] = a
        self._const_tensors[key] = t
        return t


def _is_node(x) -> bool:
    return hasattr(x, "op") and hasattr(x, "meta") and hasattr(x, "target")


def target_name(node) -> str:
    t = node.target
    if t is operator.getitem:
        return "getitem"
    name = getattr(t, "_name", None) or getattr(t, "__name__", str(t))
    overload = getattr(t, "_overloadname", None)
    if name.startswith("aten::"):
        name = "aten." + name[6:]
    return f"{name}.{overload}" if overload and not name.endswith(f".{overload}") else name


def where(node) -> str:
    """ ' at file:line' from the source location the export recorded, or ''."""
    trace = node.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in trace.strip().splitlines() if ln.strip().startswith("File ")]
    if not lines:
        return ""
    last = lines[-1]       # File "model.py", line 12, in forward
    try:
        file = last.split('"')[1]
        line = last.split("line ")[1].split(",")[0]
        return f" at {file}:{line}"
    except IndexError:
        return ""


def to_numpy(value, what: str) -> np.ndarray:
    import torch

    if isinstance(value, torch.Tensor):
        t = value.detach()
        if t.dtype in (torch.float16, torch.bfloat16):
            raise ModelImportError(f"{what} is {t.dtype}; export in float32 or float64")
        return t.cpu().contiguous().numpy().copy()
    if isinstance(value, (bool, int, float)):
        return np.array(value)
    raise ModelImportError(f"{what} is a {type(value).__name__}, not a tensor")
