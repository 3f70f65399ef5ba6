"""What runs each policy: the executor on the chosen backend, or the numpy reference
interpreter for a policy without a Program; and the unlimited-memory run a policy's
parameters must equal bit for bit.

The backend is made from its registry record (``engine.backend_registry``), so nothing
here names a backend or a policy.
"""
from __future__ import annotations

from planner.facts import GraphFacts
from planner.policy import Policy, unlimited, unlimited_program

from ..backend_registry import Placement
from ..executor import ProgramExecutor
from ..ir import Graph
from ..training import ReferenceRunner


class Made:
    """A runner and the backend under it (None for the reference interpreter); closes it."""

    def __init__(self, runner, backend=None):
        self.runner, self.backend = runner, backend

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.backend is not None:
            self.backend.close()


def executor(program, g: Graph, placement: Placement, sanitize: bool, seed: int, reduce=None) -> Made:
    """``reduce``: a data-parallel Program's all-reduce (engine.executor.ProgramExecutor)."""
    backend = placement.kind.create(placement, sanitize, seed)
    try:
        return Made(ProgramExecutor(program, g, backend, reduce), backend)
    except BaseException:
        backend.close()
        raise


def device_name(backend) -> str:
    """The device's name as the backend reports it ('' when it has none)."""
    return getattr(backend, "device_name", "") or ""


def make_runner(policy: Policy, programs: dict, g: Graph, placement: Placement, sanitize: bool = False,
                seed: int = 0) -> Made:
    if not policy.runs_program:
        return Made(ReferenceRunner(g))
    return executor(programs[policy.name][0], g, placement, sanitize, seed)


def unlimited_runner(placement: Placement, facts: GraphFacts, programs: dict) -> Made:
    """The run whose parameters a policy's must equal bit for bit: the numpy reference on a
    backend whose kernels are numpy's own; otherwise the unlimited-memory Program on the same
    backend, since other kernels round differently from numpy."""
    g = facts.graph
    if placement.kind.numpy_twin:
        return Made(ReferenceRunner(g))
    name = unlimited().name
    ideal = programs[name][0] if name in programs else unlimited_program(g, facts)
    return executor(ideal, g, placement, False, 0)
