"""The operator registry: every operator is declared once, as one class.

An operator class holds, together, everything the rest of the system needs to
know about it (as MXNet registers an op once with all its attributes):

- ``canon(attrs)``: fill defaults and validate the attributes;
- ``infer(attrs, ins)``: the output shapes and dtypes from the inputs' (the
  shape rule; raises :class:`ShapeError` with a message a person can act on);
- ``cost(attrs, ins, outs)``: flops and bytes moved, for analytic profiles;
- ``gradient(g, node, dys, wanted)``: emit the backward operators into the
  graph builder ``g`` and return one gradient tensor (or None) per input;
- ``compute(attrs, xs, ys)``: the numpy reference kernel, which writes into the
  output arrays it is given and is deterministic;
- ``cuda_kernels``: the names of its float32 CUDA C kernels (in a ``.cu`` file
  beside the op family; float64 twins add ``_f64``), and ``cuda_launches``: how they
  are launched for given shapes (``ops/cuda_launch.py``), with ``cuda_workspaces``
  for any scratch memory they need (laid out by ``ops/workspace.py``).

Operators know nothing of graphs: ``ins``/``outs`` are anything with ``shape``
and ``dtype``, and ``g`` is any builder with ``apply``/``shape``/``dtype``.
Backward computations are ordinary registered operators.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from .workspace import workspace_bytes

Shape = tuple[int, ...]
Spec = tuple[Shape, np.dtype]


class OpError(ValueError):
    """A problem with one operator application; the message names no node (the graph adds that)."""


class ShapeError(OpError):
    """Input shapes or dtypes that the operator's shape rule rejects."""


class UnknownOpError(OpError):
    pass


@dataclass(frozen=True)
class Cost:
    flops: float
    bytes: float


def numel(shape: Iterable[int]) -> int:
    """Elements of a tensor of this shape (pass ``t.shape``, not the tensor)."""
    return math.prod(shape)


def nbytes(spec) -> int:
    return numel(spec.shape) * np.dtype(spec.dtype).itemsize


class Op:
    """Base class of an operator declaration. Subclasses set ``name`` and override what differs."""

    name: str = ""
    # Number of inputs, or None for variadic (at least one).
    arity: int | None = 1
    # Output index -> input index: this output is the next value of that (state) input,
    # e.g. an updated parameter or running statistic. The graph records the pair.
    state_outputs: dict[int, int] = {}
    # Output index -> input index: the kernel may write this output over that input's
    # memory (an SGD update, a running sum). Whether a plan does is engine.inplace's rule.
    inplace: dict[int, int] = {}
    differentiable: bool = True
    # Whether a plan may run the operator again to recreate dropped outputs (a recomputation):
    # only when its outputs depend on its inputs alone. Never for an operator with state outputs
    # (an update, an accumulation into state, batch norm's running statistics) or randomness:
    # those set it False. Read in one place, ``engine.recompute.recomputable``.
    recomputable: bool = True
    # The input that is the gradient an optimizer's step reads (None: the operator reads none). A
    # data-parallel plan all-reduces that tensor across the ranks before the operator runs
    # (planner/allreduce.py; the verifier checks it).
    gradient_input: int | None = None
    cuda_kernels: tuple[str, ...] = ()

    def check_arity(self, n_inputs: int) -> None:
        """Raise OpError unless the operator takes ``n_inputs`` inputs."""
        if self.arity is not None and n_inputs != self.arity:
            raise OpError(f"takes {self.arity} inputs, got {n_inputs}")
        if self.arity is None and not n_inputs:
            raise OpError("takes at least one input, got none")

    def inplace_for(self, attrs) -> dict[int, int]:
        """``inplace`` for a node with these attributes (an operator whose permission is a
        node's choice, like ``add(in_place=True)``, overrides this)."""
        return self.inplace

    def canon(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs:
            raise OpError(f"takes no attributes, got {sorted(attrs)}")
        return {}

    def infer(self, attrs, ins) -> list[Spec]:
        raise NotImplementedError

    def cost(self, attrs, ins, outs) -> Cost:
        """Default: one flop per output element; every input and output read or written once."""
        moved = sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs)
        return Cost(float(sum(numel(t.shape) for t in outs)), float(moved))

    def gradient(self, g, node, dys, wanted) -> list:
        raise OpError(f"operator '{self.name}' has no gradient")

    def compute(self, attrs, xs: list[np.ndarray], ys: list[np.ndarray]) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ CUDA
    # ``cuda_launches`` describes the kernel launches of one application (see
    # ops/cuda_launch.py); ``cuda_workspaces`` the byte sizes of the scratch regions they
    # use, referred to as WS(0), WS(1)... in launch arguments.

    def cuda_launches(self, attrs, ins, outs) -> list:
        raise OpError(f"operator '{self.name}' has no CUDA kernels")

    def cuda_workspaces(self, attrs, ins, outs) -> tuple[int, ...]:
        return ()

    def workspace(self, attrs, ins, outs) -> int:
        """Scratch bytes the operator needs on the device beyond its inputs and outputs."""
        return workspace_bytes(self.cuda_workspaces(attrs, ins, outs))


REGISTRY: dict[str, Op] = {}


def register(cls: type[Op]) -> type[Op]:
    if not cls.name or cls.name in REGISTRY:
        raise RuntimeError(f"operator name {cls.name!r} missing or registered twice")
    REGISTRY[cls.name] = cls()
    return cls


def get(name: str) -> Op:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownOpError(f"unknown operator '{name}' (known: {', '.join(sorted(REGISTRY))})") from None


# ---------------------------------------------------------------- helpers for declarations

def same_dtype(ins) -> np.dtype:
    dtypes = {np.dtype(t.dtype) for t in ins}
    if len(dtypes) != 1:
        raise ShapeError(f"inputs have different dtypes {sorted(str(d) for d in dtypes)}")
    return dtypes.pop()


def require_float(dtype) -> None:
    if np.dtype(dtype).kind != "f":
        raise ShapeError(f"needs a floating-point input, got {np.dtype(dtype)}")


def int_pair(value, what: str) -> tuple[int, int]:
    """Accept 3 or (3, 3) for a 2-D attribute such as a kernel size, stride or padding."""
    if isinstance(value, (int, np.integer)):
        pair = (int(value), int(value))
    else:
        try:
            pair = tuple(int(v) for v in value)
        except TypeError:
            raise OpError(f"{what} must be an int or a pair of ints, got {value!r}") from None
    if len(pair) != 2:
        raise OpError(f"{what} must be an int or a pair of ints, got {value!r}")
    return pair


def check_attrs(attrs: dict, allowed: dict[str, Any], required: Sequence[str] = ()) -> dict:
    """Return attrs with defaults from ``allowed`` filled in; reject unknown or missing names."""
    unknown = set(attrs) - set(allowed)
    if unknown:
        raise OpError(f"unknown attributes {sorted(unknown)} (allowed: {sorted(allowed)})")
    missing = [k for k in required if k not in attrs]
    if missing:
        raise OpError(f"missing attributes {missing}")
    out = dict(allowed)
    out.update(attrs)
    return out



def positive_eps(attrs) -> dict:
    """A normalization's attributes: ``eps`` (default 1e-5), a positive number."""
    a = check_attrs(attrs, {"eps": 1e-5})
    try:
        eps = float(a["eps"])
    except (TypeError, ValueError):
        raise OpError(f"eps must be a number, got {a['eps']!r}") from None
    if not eps > 0:
        raise OpError(f"eps must be positive, got {a['eps']!r}")
    return {"eps": eps}


def emit(g, op: str, inputs, **attrs) -> int:
    """Apply a single-output operator in a gradient builder and return its output id."""
    (y,) = g.apply(op, list(inputs), **attrs)
    return y


def zeros_like(g, t) -> int:
    return emit(g, "fill", [], shape=tuple(g.shape(t)), dtype=str(g.dtype(t)), value=0.0)
