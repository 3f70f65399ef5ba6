"""Iterations whose graph changes, as a training loop really produces them (SmartSwap, 004 §2).

A static training graph is one iteration repeated. Real training is not: sequence
lengths vary from batch to batch (bucketed), an evaluation pass (forward only) runs
every K steps, gradients are accumulated over k micro-batches before one update, and
an update is skipped when a loss is not finite (dynamic loss scaling's overflow).
``IterationPlan`` says what iteration i does; ``IterationGraphs`` makes (once per
kind and length) the graphs those iterations run:

- ``micro(seq)``: forward and backward of one micro-batch, the loss multiplied by a
  scalar input ``loss_scale``, each parameter's gradient added into a persisted
  accumulator ``<param>.grad_acc`` (``accumulate_state``); no update;
- ``update()``: the optimizer's update from the accumulators' mean (its "loss" is the loss
  scale it ran with, read back: the executor reads a scalar from every graph);
- ``evaluation(seq)``: the forward pass and the loss only.

An iteration is a micro-step (then, at the end of an accumulation window whose losses
were all finite, the update graph too) or an evaluation. The update runs as its own
graph after the host has read the micro-step's loss: that read is the point where an
eager framework's loss scaler decides to skip (PyTorch's GradScaler synchronizes there
too), so a skipped update is an iteration whose operator sequence lacks the optimizer.
After an update or a skipped window the loop zeroes the accumulators (``zero_grad``).

Parameters and optimizer state are named the same in every graph (a GPT's position
table has rows for the longest bucket, ``zoo.gpt(positions=...)``), so the values
carry from one graph to the next by name (``engine.training.StreamTrainer``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .autodiff import build_training_graph
from .errors import EngineError
from .ir import Graph, Kind

TRAIN, EVAL = "train", "eval"
DATA_KINDS = (Kind.INPUT, Kind.LABEL)
LOSS_SCALE = "loss_scale"
ACC_SUFFIX = ".grad_acc"


class StreamError(EngineError, ValueError):
    """Settings of a changing-graph run that cannot work; the message says what would."""


@dataclass(frozen=True)
class StreamSettings:
    buckets: tuple[int, ...] = ()      # sequence lengths drawn per batch; () = the model's own
    eval_every: int = 0                # an evaluation iteration every K iterations (0: never)
    accumulate: int = 1                # micro-batches per update
    nonfinite_at: tuple[int, ...] = ()  # iterations whose loss is forced non-finite (loss scale inf)
    seed: int = 0

    def check(self) -> None:
        if any(b < 1 for b in self.buckets):
            raise StreamError(f"sequence buckets must be positive lengths, got {list(self.buckets)}")
        if self.eval_every < 0 or self.eval_every == 1:
            raise StreamError(f"--eval-every must be 0 (never) or at least 2, got {self.eval_every}")
        if self.accumulate < 1:
            raise StreamError(f"--accumulate must be at least 1 micro-batch, got {self.accumulate}")


@dataclass(frozen=True)
class Step:
    """What iteration ``iteration`` does."""
    iteration: int
    kind: str                 # TRAIN (a micro-step) or EVAL
    seq: int | None           # its sequence length (None: the model's own)
    ends_window: bool         # a micro-step that ends an accumulation window: the update may follow
    loss_scale: float = 1.0


class IterationPlan:
    """Iteration i -> Step, a function of (settings, i) only, so a resumed run sees the same stream."""

    def __init__(self, settings: StreamSettings):
        settings.check()
        self.s = settings

    def step(self, i: int) -> Step:
        s = self.s
        if s.eval_every and (i + 1) % s.eval_every == 0:
            return Step(i, EVAL, max(s.buckets) if s.buckets else None, False)
        # Micro-steps so far: iterations before i that were not evaluations.
        micro = i - ((i + 1) // s.eval_every if s.eval_every else 0)
        seq = None
        if s.buckets:
            seq = s.buckets[int(np.random.default_rng([s.seed, 0xB0C, i]).integers(len(s.buckets)))]
        scale = float("inf") if i in s.nonfinite_at else 1.0
        return Step(i, TRAIN, seq, (micro + 1) % s.accumulate == 0, scale)


class Window:
    """An accumulation window's bookkeeping: after each micro-step, whether the update runs now
    (True), is skipped because a loss of the window was not finite (False), or the window goes
    on (None). Counts updates and skipped windows."""

    def __init__(self):
        self.finite = True
        self.updates = self.skipped = 0

    def after_micro(self, step: Step, loss_finite: bool) -> bool | None:
        self.finite &= loss_finite
        if not step.ends_window:
            return None
        run, self.finite = self.finite, True
        if run:
            self.updates += 1
        else:
            self.skipped += 1
        return run


def graphs_of(plan: IterationPlan, graphs: "IterationGraphs", iterations: int) -> list[tuple[Step, list[Graph]]]:
    """The graphs each of the first ``iterations`` runs, without running them: a micro-step's
    loss taken as finite unless its loss scale is not (a benchmark's simulated stream)."""
    window, out = Window(), []
    for i in range(iterations):
        s = plan.step(i)
        if s.kind == EVAL:
            out.append((s, [graphs.evaluation(s.seq)]))
            continue
        micro = graphs.micro(s.seq)
        run = window.after_micro(s, bool(np.isfinite(s.loss_scale)))
        out.append((s, [micro, graphs.update(micro)] if run else [micro]))
    return out


class GradientAccumulator:
    """An 'optimizer' for ``build_training_graph`` that only adds each gradient into its
    persisted accumulator: the micro-step of gradient accumulation."""

    def update(self, g: Graph, p: int, gp: int) -> None:
        name = g.tensors[p].name
        acc = g.state(name + ACC_SUFFIX, g.shape(p), g.dtype(p), init="zeros")
        g.apply("accumulate_state", [acc, gp], name=f"{name}.accumulate")


def forward_only(g: Graph, name: str) -> tuple[Graph, int]:
    """A new graph holding the nodes ``g``'s loss depends on (same names, leaves and
    attributes), and its loss tensor."""
    if g.loss is None:
        raise StreamError(f"graph '{g.name}' has no loss to evaluate")
    needed = {g.loss}
    nodes = []
    for n in reversed(g.nodes):
        if needed.intersection(n.outputs):
            nodes.append(n)
            needed.update(n.inputs)
    f = Graph(name)
    new: dict[int, int] = {}
    for t in sorted(x for x in needed if g.producer[x] == -1):
        x = g.tensors[t]
        new[t] = f.restore_tensor(x.name, x.shape, x.dtype, x.kind, x.init)
    for n in reversed(nodes):
        outs = f.apply(n.op, [new[t] for t in n.inputs], name=n.name, **n.attrs)
        new.update(zip(n.outputs, outs))
    return f, new[g.loss]


class IterationGraphs:
    """The graphs of a changing-graph run, each made once: ``build(seq)`` returns the model's
    training graph at sequence length ``seq`` (None: its own); ``optimizer`` is the update's
    (engine.autodiff SGD or Adam)."""

    def __init__(self, build: Callable[[int | None], Graph], optimizer, accumulate: int):
        self.build, self.optimizer, self.accumulate = build, optimizer, accumulate
        self._graphs: dict[tuple, Graph] = {}

    def _once(self, key: tuple, make: Callable[[], Graph]) -> Graph:
        g = self._graphs.get(key)
        if g is None:
            g = self._graphs[key] = make()
        return g

    def _forward(self, seq: int | None, suffix: str) -> tuple[Graph, int]:
        base = self._once(("model", seq), lambda: self.build(seq))
        return forward_only(base, f"{base.name}{'' if seq is None else f'-s{seq}'}-{suffix}")

    def micro(self, seq: int | None) -> Graph:
        def make():
            g, loss = self._forward(seq, "micro")
            scale = g.input(LOSS_SCALE, (), g.dtype(loss).name)
            (scaled,) = g.apply("mul", [loss, scale], name="scaled_loss")
            return build_training_graph(g, scaled, GradientAccumulator())
        return self._once(("micro", seq), make)

    def evaluation(self, seq: int | None) -> Graph:
        def make():
            g, loss = self._forward(seq, "eval")
            g.set_loss(loss)
            return g
        return self._once(("eval", seq), make)

    def update(self, like: Graph) -> Graph:
        """The optimizer's update of every parameter of micro graph ``like``, from its accumulator."""
        def make():
            g = Graph(f"{like.name.rsplit('-micro', 1)[0].split('-s')[0]}-update")
            for t in like.leaves(Kind.PARAMETER):
                x = like.tensors[t]
                p = g.parameter(x.name, x.shape, x.dtype.name, init=x.init)
                acc = g.state(x.name + ACC_SUFFIX, x.shape, x.dtype.name, init="zeros")
                if self.accumulate > 1:
                    (acc,) = g.apply("scale", [acc], name=f"{x.name}.grad_mean", factor=1.0 / self.accumulate)
                self.optimizer.update(g, p, acc)
            # An update has no loss of its own; the loop reads back the loss scale it ran with,
            # so that every graph of the stream ends in a scalar (the executor reads one).
            scale = g.input(LOSS_SCALE, (), like.tensors[like.tensor_id(LOSS_SCALE)].dtype.name)
            (echo,) = g.apply("scale", [scale], name="loss_scale_read", factor=1.0)
            g.set_loss(echo)
            return g
        return self._once(("update",), make)

    def graphs(self) -> list[Graph]:
        """Every graph made so far, models at each length left out."""
        return [g for k, g in self._graphs.items() if k[0] != "model"]


def accumulators(g: Graph) -> list[int]:
    """The gradient accumulators among ``g``'s persistent leaves."""
    return [t for t in g.leaves(Kind.STATE) if g.tensors[t].name.endswith(ACC_SUFFIX)]


def scale_feed(g: Graph, step: Step) -> dict[int, np.ndarray]:
    """The loss-scale input of a micro graph for this step (empty for other graphs)."""
    try:
        t = g.tensor_id(LOSS_SCALE)
    except EngineError:
        return {}
    return {t: np.asarray(step.loss_scale, dtype=g.tensors[t].dtype)}


def buckets_of(text: str | Sequence[int]) -> tuple[int, ...]:
    """'8,12,16' -> (8, 12, 16); StreamError on anything else."""
    if not isinstance(text, str):
        return tuple(int(b) for b in text)
    try:
        out = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise StreamError(f"--varying-seq takes lengths separated by commas (e.g. 8,12,16), got '{text}'") \
            from None
    if not out or any(b < 1 for b in out):
        raise StreamError(f"--varying-seq takes positive lengths separated by commas (e.g. 8,12,16), got '{text}'")
    return tuple(sorted(set(out)))
