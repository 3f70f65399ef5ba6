"""Inference under a memory budget, as a library (SwapAdvisor Section 6.3): a forward-only
graph planned with its weights as persistent state (``plan_inference``), and batches run through
a Program on a backend or the numpy reference (``InferenceRun``), their outputs compared bit for
bit. ``python -m engine.infer`` (engine/cli/infer.py), engine/library/server.py and
bench/table2.py use it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..backend_registry import Placement
from ..data import TeacherData
from ..errors import EngineError, UsageError
from ..executor import ProgramExecutor
from ..ir import Graph, Kind
from ..training import ReferenceRunner, Trainer
from .imported import is_model_folder, read_model
from .models import SMALL_MODELS, batch_of, model_graph
from .planning import Plan, plan_named


ONE_REQUEST = 1      # a forward-only zoo model's own batch: inference serves requests one at a time


def forward_graph(model: str, batch: int | None = None, size: int | None = None, dtype: str = "float32",
                  **options) -> Graph:
    """The forward-only graph of ``model``; UsageError (one line) for a model that is not one.
    ``batch`` None: the model's own, one request for a zoo model, the export's for an imported one."""
    if is_model_folder(model):
        return _imported_forward(model, batch, size)
    batch = ONE_REQUEST if batch is None else batch
    small = model.strip().lower() in SMALL_MODELS        # training models: refused below, as any other
    g = model_graph(model, batch, size, dtype) if small else _zoo_graph(model, batch, size, dtype, options)
    if g.loss is not None or not g.outputs:
        raise UsageError(f"--model {model} is a training model; inference runs forward-only models "
                         "with outputs: resnet-D (e.g. resnet-152)")
    return g


def _imported_forward(folder: str, batch: int | None, size: int | None) -> Graph:
    """An imported inference program (python -m engine.importer --inference)."""
    imported = read_model(folder)
    if imported.task != "inference":
        raise UsageError(f"--model {folder} is a training program (it returns a loss); train it with "
                         "python -m engine.train, or import a forward-only export with --inference")
    g = imported.forward_graph()
    first = g.tensors[g.leaves(Kind.INPUT)[0]].shape[0] if g.leaves(Kind.INPUT) else None
    if batch is not None and batch != first or size is not None:
        raise UsageError(f"--model {folder}: an imported model keeps the shapes it was exported with (batch "
                         f"{first}); export it again instead of --batch/--size")
    return g


def _zoo_graph(model, batch, size, dtype, options) -> Graph:
    import zoo

    try:
        return zoo.build(model, batch=batch, size=size, dtype=dtype, **options)
    except ValueError as e:
        raise UsageError(f"--model {model}: {e}") from None


@dataclass(frozen=True)
class PlannedInference:
    """A verified Program for one budget (None: the budget is too small to run: ``why``)."""
    budget: int | None                # None: unlimited (the ideal plan)
    plan: Plan | None
    why: str = ""

    @property
    def seconds(self) -> float:
        return self.plan.seconds if self.plan else float("nan")


def plan_inference(g: Graph, budget: int | None, policy: str = "swapadvisor", profile="v100",
                   search_seconds: float = 0.0, seed: int = 0) -> PlannedInference:
    """Plan ``g`` under ``budget`` bytes (None: unlimited, the ideal policy), verified and
    simulated on ``profile``, after ``search_seconds`` of genetic search (for the policy that
    searches); a budget that cannot run comes back with its reason."""
    try:
        if budget is None:
            return PlannedInference(None, plan_named(g, "ideal", profile=profile))
        return PlannedInference(budget, plan_named(g, policy, int(budget), profile, search_seconds, seed))
    except EngineError as e:
        if budget is None:
            raise
        return PlannedInference(budget, None, str(e))


class InferenceRun:
    """Runs batches of a forward-only graph through a runner (a ProgramExecutor on a backend,
    or the numpy reference with unlimited memory) with the weights drawn from ``seed``; each
    batch's outputs come back (tensor id -> array)."""

    def __init__(self, g: Graph, runner, seed: int = 0, data: TeacherData | None = None):
        self.g, self.runner = g, runner
        self.trainer = Trainer(g, seed=seed, runner=runner, data=data or TeacherData(g, seed, samples=4 * batch_of(g)))
        self.seconds: list[float] = []

    def batch(self, feeds: dict[int, np.ndarray] | None = None) -> dict[int, np.ndarray]:
        """One batch: ``feeds`` (input id -> array) or the next synthetic one; its outputs."""
        if feeds is None:
            self.trainer.step()
            self.seconds.append(self.trainer.step_seconds)
        else:
            t0 = time.perf_counter()
            self.runner.step(feeds)
            self.seconds.append(time.perf_counter() - t0)
        return self.runner.outputs()


def executor_run(g: Graph, program, placement: Placement, sanitize: bool = False, seed: int = 0):
    """(InferenceRun on the backend, the backend to close)."""
    backend = placement.kind.create(placement, sanitize, seed)
    try:
        return InferenceRun(g, ProgramExecutor(program, g, backend), seed), backend
    except BaseException:
        backend.close()
        raise


def unlimited_outputs(g: Graph, placement: Placement, batches: int, seed: int = 0) -> list[dict]:
    """Each batch's outputs with unlimited memory: the numpy reference on a backend whose kernels
    are numpy's, otherwise the ideal Program on the same backend (other kernels round apart)."""
    if placement.kind.numpy_twin:
        run = InferenceRun(g, ReferenceRunner(g), seed)
        return [run.batch() for _ in range(batches)]
    ideal = plan_inference(g, None).plan.program
    run, backend = executor_run(g, ideal, placement, False, seed)
    try:
        return [run.batch() for _ in range(batches)]
    finally:
        backend.close()


def same_outputs(a: list[dict], b: list[dict]) -> bool:
    return len(a) == len(b) and all(x.keys() == y.keys() and all(np.array_equal(x[t], y[t], equal_nan=True)
                                                                for t in x) for x, y in zip(a, b))
