"""The training loop: state that persists across iterations, data, and checkpoints.

A Trainer holds the values of every parameter and optimizer state, feeds each
iteration a batch, runs the iteration through an executor, and moves each
state's next value into its place. Checkpoints are npz files of named arrays
plus a JSON header, validated on load (never pickled).
"""
from __future__ import annotations

import hashlib
import json
import time
import warnings
from contextlib import contextmanager
from typing import Callable, Mapping, Protocol, Sequence

import numpy as np

from . import reference
from .graph_check import check_order
from .initializers import initial_state, initial_value
from . import iteration_stream as stream
from .ir import PERSISTENT_KINDS, Graph, Kind
from . import checkpoint
from .blas_threads import one_blas_thread
from .checkpoint import FORMAT as CHECKPOINT_FORMAT, CheckpointError
from .data import DataSet, TeacherData

__all__ = ["CHECKPOINT_FORMAT", "CheckpointError", "ReferenceRunner", "Runner", "StreamTrainer", "Trainer",
           "checkpoint_mismatch", "state_fingerprint"]


class Runner(Protocol):
    """Runs iterations and owns the values of persistent state between them."""

    def load_state(self, state: Mapping[int, np.ndarray]) -> None: ...
    def state(self) -> dict[int, np.ndarray]: ...
    def step(self, batch: Mapping[int, np.ndarray]) -> float: ...


class ReferenceRunner:
    """The numpy reference interpreter with unlimited memory, in a given topological order."""

    def __init__(self, g: Graph, order: Sequence[int] | None = None):
        self.g = g
        self.order = g.default_order() if order is None else list(order)
        check_order(g, self.order)
        self._state: dict[int, np.ndarray] = {}
        self._outputs: dict[int, np.ndarray] = {}

    def load_state(self, state):
        self._state = dict(state)

    def state(self):
        return dict(self._state)

    def step(self, batch):
        g = self.g
        with one_blas_thread():         # timed like the CPU backend's streams, and as steady
            out = reference.execute(g, self.order, {**self._state, **batch},
                                    keep=[nxt for _, nxt in g.state_pairs] + g.read_back())
        for cur, nxt in g.state_pairs:
            self._state[cur] = out[nxt]
        self._outputs = {t: out[t] for t in g.outputs}
        return float(out[g.loss]) if g.loss is not None else float("nan")

    def outputs(self) -> dict[int, np.ndarray]:
        """The graph's outputs (an inference graph's results) after the last ``step``."""
        return dict(self._outputs)


def state_fingerprint(g: Graph) -> str:
    """Identifies the set of persistent tensors (names, shapes, dtypes) a checkpoint must match."""
    items = [(g.tensors[t].name, g.tensors[t].shape, g.tensors[t].dtype.name)
             for t in g.leaves(*PERSISTENT_KINDS)]
    return hashlib.sha256(json.dumps(sorted(items)).encode()).hexdigest()[:16]


class Trainer:
    def __init__(self, g: Graph, seed: int = 0, runner: Runner | None = None,
                 data: TeacherData | None = None):
        if g.loss is None and not g.outputs:
            raise ValueError(f"graph '{g.name}' has no loss and no outputs; build it with "
                             "engine.autodiff.build_training_graph")
        self.g = g
        self.seed = seed
        self.runner = runner or ReferenceRunner(g)
        self.data = data or TeacherData(g, seed)
        self.runner.load_state(initial_state(g, seed))
        self.iteration = 0
        self.step_seconds = 0.0     # the last iteration's time, without making its batch

    def step(self) -> float:
        """Run one iteration; return its loss."""
        batch = self.data.batch(self.iteration)
        t0 = time.perf_counter()
        loss = self.runner.step(batch)
        self.step_seconds = time.perf_counter() - t0
        self.iteration += 1
        return loss

    @property
    def state(self) -> dict[int, np.ndarray]:
        return self.runner.state()

    def named_state(self) -> dict[str, np.ndarray]:
        return {self.g.tensors[t].name: a for t, a in self.runner.state().items()}

    # ------------------------------------------------------------------ checkpoints
    def save(self, path: str, settings: Mapping | None = None) -> None:
        """Write parameters, optimizer state, the iteration count, the seed and ``settings``
        (the run's other choices, e.g. lr, checked on resume); atomic and durable
        (engine/checkpoint.py). Call it between iterations only: mid-iteration the state is
        half old, half new (engine/interrupts.py keeps Ctrl-C out of an iteration)."""
        header = {"graph": self.g.name, "fingerprint": state_fingerprint(self.g), "iteration": self.iteration,
                  "seed": self.seed, "settings": dict(settings or {})}
        checkpoint.write(path, header, self.named_state())

    def load(self, path: str) -> None:
        """Restore a checkpoint saved for this graph; CheckpointError (one line) if it does not fit."""
        header, arrays = checkpoint.read(path)
        why = checkpoint_mismatch(self.g, header, arrays)
        if why:
            raise CheckpointError(f"checkpoint '{path}' does not fit this model: {why}")
        state = {}
        for t in self.g.leaves(*PERSISTENT_KINDS):
            x = self.g.tensors[t]
            a = arrays.get(x.name)
            if a is None or a.shape != x.shape or a.dtype != x.dtype:
                raise CheckpointError(f"checkpoint '{path}': tensor '{x.name}' is missing or has the wrong "
                                      f"shape/dtype (want {x.shape} {x.dtype})")
            state[t] = a
        iteration = header.get("iteration")
        if not isinstance(iteration, int) or isinstance(iteration, bool) or iteration < 0:
            raise CheckpointError(f"checkpoint '{path}': bad iteration count {iteration!r:.40}")
        self.runner.load_state(state)
        self.iteration = iteration


def checkpoint_mismatch(g: Graph, header: dict, arrays: Mapping[str, np.ndarray]) -> str | None:
    """What differs between a checkpoint (``engine.checkpoint.read``) and this graph's
    persistent tensors, in words; None when it fits."""
    if header.get("fingerprint") == state_fingerprint(g):
        return None
    saved = header.get("graph")
    if saved != g.name:
        return f"it was saved for model '{saved!s:.60}', this is '{g.name}'; use the same model flags"
    for t in g.leaves(*PERSISTENT_KINDS):
        x = g.tensors[t]
        a = arrays.get(x.name)
        if a is None:
            return f"it has no tensor '{x.name}'; use the same model flags"
        if a.dtype != x.dtype:
            return f"it holds {a.dtype} tensors, this run is {x.dtype}; pass --dtype {a.dtype}"
        if a.shape != x.shape:
            return (f"its tensor '{x.name}' has shape {a.shape}, this model's {x.shape}; use the same "
                    "--batch, --size and model flags")
    return "its set of tensors differs from this model's; use the same model flags"


# numpy's floating-point warnings: what a non-finite step (forced or diverged) makes it say
NUMPY_NONFINITE = r"(invalid value|overflow|divide by zero) encountered"


@contextmanager
def nonfinite_quietly():
    """Silence numpy about inf and NaN for one step: the stream checks each loss itself and
    says so in one line (engine/cli/stream_run.py), where numpy printed a RuntimeWarning with
    a source path per kernel. np.errstate alone is not enough: it is per thread, and the CPU
    backend computes on its stream threads, whose warnings the filter below catches (the
    filters are global to the process; only this thread changes them)."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", NUMPY_NONFINITE, RuntimeWarning)
        yield


class StreamTrainer:
    """Training whose graph changes from iteration to iteration (engine.iteration_stream):
    micro-steps at bucketed lengths, an update after each accumulation window whose losses
    were all finite, evaluations. Parameters and state persist by name across the graphs:
    before a graph runs its runner is loaded with their current values, after it they are
    read back, bit for bit (host copies; a graph's Program decides where they live while it
    runs). ``runner_for(graph)`` gives the runner of a graph (the caller plans, caches and
    gates Programs); ``after(i, graphs, seconds, step)`` is told each iteration's graphs in the
    order they ran and the time they took."""

    def __init__(self, graphs: "stream.IterationGraphs", plan: "stream.IterationPlan",
                 runner_for: Callable[[Graph], Runner], seed: int = 0,
                 after: Callable[[int, list[Graph], float, "stream.Step"], None] | None = None,
                 data: Mapping[Graph, DataSet] | None = None):
        self.graphs, self.plan, self.runner_for, self.seed, self.after = graphs, plan, runner_for, seed, after
        self.values: dict[str, np.ndarray] = {}      # every persistent tensor, by name
        self._data: dict[Graph, DataSet] = dict(data or {})     # a graph's data; the teacher's when not given
        self.iteration = 0
        self.window = stream.Window()
        self.losses: list[tuple[int, str, float]] = []   # (iteration, kind, loss)

    def _state_of(self, g: Graph) -> dict[int, np.ndarray]:
        out = {}
        for t in g.leaves(*PERSISTENT_KINDS):
            x = g.tensors[t]
            a = self.values.get(x.name)
            if a is None:
                a = self.values[x.name] = initial_value(x.name, x.init, x.shape, x.dtype, self.seed)
            elif a.shape != x.shape or a.dtype != x.dtype:
                raise CheckpointError(f"tensor '{x.name}' is {a.shape} {a.dtype} in one graph of the stream "
                                      f"and {x.shape} {x.dtype} in '{g.name}': the graphs must share their state")
            out[t] = a
        return out

    def _run(self, g: Graph, step: "stream.Step") -> float:
        runner = self.runner_for(g)
        runner.load_state(self._state_of(g))
        data = self._data.get(g)
        if data is None and g.leaves(Kind.LABEL):
            data = self._data[g] = TeacherData(g, self.seed)
        batch = data.batch(step.iteration) if data is not None else {}
        batch.update(stream.scale_feed(g, step))
        with nonfinite_quietly():
            loss = runner.step(batch)
        for t, a in runner.state().items():
            self.values[g.tensors[t].name] = a
        return loss

    def _zero_accumulators(self, g: Graph) -> None:
        for t in stream.accumulators(g):
            x = g.tensors[t]
            self.values[x.name] = np.zeros(x.shape, x.dtype)

    def step(self) -> float:
        """Run iteration ``self.iteration`` (a micro-step, plus the update at the end of a finite
        window, or an evaluation); return its loss."""
        s = self.plan.step(self.iteration)
        t0 = time.perf_counter()
        if s.kind == stream.EVAL:
            ran = [self.graphs.evaluation(s.seq)]
            loss = self._run(ran[0], s)
        else:
            micro = self.graphs.micro(s.seq)
            ran = [micro]
            loss = self._run(micro, s)
            run_update = self.window.after_micro(s, bool(np.isfinite(loss)))
            if run_update:
                update = self.graphs.update(micro)
                self._run(update, s)
                ran.append(update)
            if run_update is not None:
                self._zero_accumulators(micro)
        seconds = time.perf_counter() - t0
        self.losses.append((self.iteration, s.kind, loss))
        if self.after is not None:
            self.after(self.iteration, ran, seconds, s)
        self.iteration += 1
        return loss

    @property
    def updates(self) -> int:
        return self.window.updates

    @property
    def skipped(self) -> int:
        return self.window.skipped

    def named_state(self) -> dict[str, np.ndarray]:
        return dict(self.values)
