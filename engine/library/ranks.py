"""Data-parallel training, one rank's side (no Ray here: ``ray_ranks.py`` starts the ranks).

Each of N ranks runs the model at 1/N of the batch (its shard) as two graphs, the ones
gradient accumulation already uses (engine/iteration_stream.py): ``micro``, forward and
backward adding each gradient into a persisted ``<param>.grad_acc`` (zeroed before each
step), and ``update``, the optimizer's step from the accumulators' mean. Between the two the
accumulators are all-reduced by ``reduce`` (``rank_order_sum`` over what the collective
gathered), so the update on every rank reads the same bits.

Rank r's shard at step k is the micro-batch a single rank accumulating N micro-batches would
draw at its micro-step k*N + r (``TeacherData.batch``), and the reduction adds the N
accumulators in rank order starting from zero, which is the order that single rank adds them
in. So N ranks give the parameters and optimizer state of one rank accumulating N micro-batches
in rank order, bit for bit (``one_rank_accumulating`` is that run): the results depend on N
(a batch cut into N shards and summed is not the batch in one piece), never on timing.

State that is not a gradient (batch norm's running statistics) is each rank's own, as in a
data-parallel run that does not broadcast buffers; rank 0's is the run's.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from planner.budget import smallest_budget
from planner.facts import GraphFacts
from ops import registry as op_registry
from planner.allreduce import add_allreduce
from planner.policy import get, unlimited_program
from planner.simulate import simulate
from planner.verify import verify

from ..autodiff import make_optimizer
from ..data import DataSet, TeacherData
from ..errors import UsageError
from ..initializers import initial_value
from ..ir import PERSISTENT_KINDS, Graph, Kind
from ..profile import Profile
from ..user_data import ArrayData
from ..program import Program
from ..iteration_stream import (IterationGraphs, IterationPlan, StreamSettings, accumulators, scale_feed, Step,
                                TRAIN)
from ..training import StreamTrainer
from .models import model_graph, optimizer_of
from .planning import choose_budget, plan, profile_of
from .runners import executor, unlimited_runner
from .stream_plans import StreamPlanner, admit

ANALYTIC_PROFILE = "v100"      # the profile the ranks plan on when none is given (nothing ran yet)


@dataclass(frozen=True)
class RankSpec:
    """What every rank is told: the model, its shard, the plan's settings. Picklable."""
    model: str
    batch: int                  # the whole batch; each rank takes batch // world
    world: int
    size: int | None = None
    dtype: str = "float32"
    optimizer: str | None = None
    lr: float | None = None
    momentum: float = 0.9
    weight_decay: float = 1e-4
    seed: int = 0
    policy: str | None = "swapadvisor"   # None: unlimited memory (the numpy reference on the cpu backend)
    memory: int | None = None            # device bytes per rank; None with a policy: the default budget
    profile: str = ANALYTIC_PROFILE
    backend: str = "cpu"
    device: int = 0
    link_gbps: float | None = None
    sanitize: bool = False
    # The all-reduce as the Program's own instructions (planner/allreduce.py) in the model's one
    # training graph, run on the executor's fourth stream; False: between the micro and update graphs.
    in_program: bool = False
    bucket_bytes: int = 25 * 2**20
    # The genetic search (ga.search.SearchOptions) of each graph's plan, on the driver, its fitness
    # the simulator on the profile (a shared host divided among its ranks); None: no search.
    search: object | None = None

    @property
    def shard(self) -> int:
        return self.batch // self.world


def check_spec(spec: RankSpec) -> None:
    """One line for settings the ranks cannot run."""
    if spec.world < 1:
        raise UsageError(f"--ranks {spec.world}: give at least 1 rank")
    if spec.batch < spec.world or spec.batch % spec.world:
        raise UsageError(f"--batch {spec.batch} cannot be cut into {spec.world} equal shards; give a batch that is a "
                         f"multiple of --ranks {spec.world} (e.g. {spec.world * max(1, spec.batch // spec.world)})")


def whole_graph(spec: RankSpec) -> Graph:
    """The model's training graph (forward, backward, update) at one rank's shard of the batch."""
    check_spec(spec)
    return model_graph(spec.model, spec.shard, spec.size, spec.dtype, spec.optimizer, spec.lr, spec.momentum,
                       spec.weight_decay)


def rank_graphs(spec: RankSpec) -> tuple[Graph, Graph]:
    """(micro, update): one rank's two graphs at its shard of the batch."""
    whole = whole_graph(spec)
    optimizer = make_optimizer(optimizer_of(spec.model, spec.optimizer), spec.lr, spec.momentum, spec.weight_decay)
    graphs = IterationGraphs(lambda seq: whole, optimizer, spec.world)
    micro = graphs.micro(None)
    return micro, graphs.update(micro)


def budget_bytes(spec: RankSpec, micro: Graph, update: Graph) -> int:
    """Device bytes per rank: --memory, else the default budget of the micro graph (the larger),
    at least what the update graph needs."""
    policy = get(spec.policy)
    placed = [policy.placed_by(None)]
    if spec.memory is not None:
        return spec.memory
    return max(choose_budget(GraphFacts(micro), None, placed).device_bytes,
               smallest_budget(GraphFacts(update), placed))


def rank_order_sum(parts: Sequence[np.ndarray]) -> np.ndarray:
    """((0 + parts[0]) + parts[1]) + ...: the N ranks' accumulators added in rank order, as one
    rank accumulating their micro-batches adds them; the same bits on every rank."""
    total = np.zeros_like(parts[0])
    for p in parts:
        total += p
    return total


def flatten(arrays: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays as one contiguous buffer per dtype (a bucket: one collective call each)."""
    by_dtype: dict[str, list[np.ndarray]] = {}
    for a in arrays:
        by_dtype.setdefault(a.dtype.str, []).append(a.ravel())
    return {k: np.concatenate(v) for k, v in sorted(by_dtype.items())}


def unflatten(buckets: dict[str, np.ndarray], like: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``flatten``'s inverse: arrays shaped as ``like`` from the buckets."""
    offsets = dict.fromkeys(buckets, 0)
    out = []
    for a in like:
        k, at = a.dtype.str, offsets[a.dtype.str]
        out.append(buckets[k][at:at + a.size].reshape(a.shape).copy())
        offsets[k] = at + a.size
    return out


Reduce = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]   # this rank's buckets -> the sums


def run_graphs(spec: RankSpec) -> tuple[Graph, ...]:
    """The graphs a rank runs each step: the micro and update graphs, or the one training graph
    whose Program all-reduces (``spec.in_program``)."""
    return (whole_graph(spec),) if spec.in_program else rank_graphs(spec)


@dataclass(frozen=True)
class RankPlans:
    """The Programs every rank runs, one per graph of ``run_graphs`` (planned once, on the
    driver: rank-identical by construction), the budget they were verified under (None:
    unlimited), their simulated seconds (a single rank's: the all-reduces are not timed here)."""
    programs: tuple[Program, ...]
    device_bytes: int | None
    seconds: tuple[float, ...]
    searched: int = 0           # how many of the Programs are the search's (faster than the unsearched)

    def digests(self) -> list[str]:
        return [hashlib.sha256(json.dumps(p.to_dict(), sort_keys=True).encode()).hexdigest()[:16]
                for p in self.programs]


def planned(spec: RankSpec, device: int, profile: Profile, g: Graph) -> tuple[Program, float, bool]:
    """``g`` planned by ``spec.policy`` under ``device`` bytes, its simulated seconds on ``profile``,
    and whether it is the search's. When ranks share a host (``profile.host``) it is planned twice,
    as if the rank had the host to itself and on its share (``Profile.shared``), and the faster
    under the shared host is kept: neither wins always (bench/results/shared_host_2026-11-26.txt).
    With ``spec.search`` the genetic search plans it too, its fitness the simulator on ``profile``,
    which gives each rank its share of the host (``Profile.rank_link``): the search optimises the
    rank's plan under that sharing; its plan is kept where it is faster still."""
    def one(seen: Profile) -> tuple[Program, float, bool]:
        program = StreamPlanner(spec.policy, device, seen, None, spec.sanitize, spec.seed).plan(g).program
        return program, simulate(program, g, profile).total, False

    best = one(profile)
    if profile.host is not None:
        best = min(best, one(profile.shared()), key=lambda made: made[1])
    if spec.search is not None and get(spec.policy).searches:
        made = plan(g, get(spec.policy), profile, device, search=spec.search)
        if made.seconds < best[1]:
            best = made.program, made.seconds, True
    return best


def plan_ranks(spec: RankSpec) -> RankPlans | None:
    """Each rank's graphs planned by ``spec.policy`` under its budget (None: unlimited memory,
    nothing to plan, unless the all-reduce is the Program's: then the unlimited Program), with the
    host its ranks share if the profile says so (``planned``); the policy's fallback plans a graph
    it cannot fit (stream_plans.py). With ``spec.in_program`` the one graph's plan gets its bucketed
    all-reduces (planner/allreduce.py) and is verified again; its seconds are then simulated with
    them where the profile has a network, else a single rank's."""
    profile = profile_of(spec.profile)
    if not spec.in_program:
        if spec.policy is None:
            return None
        micro, update = rank_graphs(spec)
        device = budget_bytes(spec, micro, update)
        (m, m_s, m_found), (u, u_s, u_found) = (planned(spec, device, profile, micro),
                                                planned(spec, device, profile, update))
        return RankPlans((m, u), device, (m_s, u_s), m_found + u_found)
    (whole,) = run_graphs(spec)
    facts = GraphFacts(whole)
    found = False
    if spec.policy is None:
        device, program = None, unlimited_program(whole, facts)
        seconds = simulate(program, whole, profile).total
    else:
        device = spec.memory if spec.memory is not None else choose_budget(
            facts, None, [get(spec.policy).placed_by(None)]).device_bytes
        program, seconds, found = planned(spec, device, profile, whole)
    if spec.world > 1:
        program = add_allreduce(program, whole, spec.world, spec.bucket_bytes)
        verify(program, whole, device)
        if profile.network is not None:
            seconds = simulate(program, whole, profile).total
    return RankPlans((program,), device, (seconds,), int(found))


class RankTrainer:
    """One rank: its graphs, their runners (the Programs of ``plans`` on the chosen backend, or
    unlimited memory when None), its data, the values of every persistent tensor by name;
    ``step()`` runs the next step with ``reduce`` carrying the all-reduce of the gradient
    accumulators."""

    def __init__(self, spec: RankSpec, rank: int, reduce: Reduce, plans: RankPlans | None = None,
                 arrays: dict[str, np.ndarray] | None = None):
        from .. import backend_registry

        self.spec, self.rank, self.reduce = spec, rank, reduce
        self.micro, self.update = rank_graphs(spec)
        placement = backend_registry.choose(spec.backend, spec.device, spec.link_gbps)
        graphs = self.graphs = (whole_graph(spec),) if spec.in_program else (self.micro, self.update)
        if plans is None:
            self._made = [unlimited_runner(placement, GraphFacts(g), {}) for g in graphs]
        else:
            self._made = []
            for g, program in zip(graphs, plans.programs):
                admit(program, g, plans.device_bytes)     # made for this graph, and safe under the budget
                self._made.append(executor(program, g, placement, spec.sanitize, spec.seed,
                                           self._bucket if spec.in_program else None))
        self.runners = {g: m.runner for g, m in zip(graphs, self._made)}
        self.data = rank_data(spec, self.micro, arrays)
        self.accumulators = [self.micro.tensors[t].name for t in accumulators(self.micro)]
        self.values: dict[str, np.ndarray] = {}
        for g in graphs:
            for t in g.leaves(*PERSISTENT_KINDS):
                x = g.tensors[t]
                self.values.setdefault(x.name, initial_value(x.name, x.init, x.shape, x.dtype, spec.seed))
        self.iteration = 0
        self.program_seconds = 0.0      # wall time inside the Programs' steps, all steps (bench.ranks_measured)

    def _run(self, g: Graph, batch: dict) -> float:
        runner = self.runners[g]
        runner.load_state({t: self.values[g.tensors[t].name] for t in g.leaves(*PERSISTENT_KINDS)})
        started = time.perf_counter()
        loss = runner.step(batch)
        self.program_seconds += time.perf_counter() - started
        for t, a in runner.state().items():
            self.values[g.tensors[t].name] = a
        return loss

    def _bucket(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """A Program's all-reduce (on the executor's all-reduce stream): the bucket's gradients
        summed across the ranks in rank order, then their mean taken as the update graph's
        ``scale`` operator takes it, so the bits are the two-graph run's."""
        sums = unflatten(self.reduce(flatten(arrays)), arrays)
        n = self.spec.world
        if n > 1:
            mean = op_registry.get("scale")
            for a in sums:
                mean.compute({"factor": 1.0 / n}, [a.copy()], [a])
        return sums

    def _step_in_program(self, step: Step) -> float:
        (whole,) = self.graphs
        ids = {whole.tensors[t].name: t for t in whole.leaves(Kind.INPUT, Kind.LABEL)}
        batch = {ids[self.micro.tensors[t].name]: a for t, a in self.data.batch(step.iteration).items()
                 if self.micro.tensors[t].name in ids}
        loss = self._run(whole, batch)
        self.iteration += 1
        return loss

    def step(self) -> float:
        """One data-parallel step; returns this rank's micro-batch loss."""
        k, n = self.iteration, self.spec.world
        if self.spec.in_program:
            return self._step_in_program(Step(k * n + self.rank, TRAIN, None, True))
        for name in self.accumulators:
            self.values[name] = np.zeros_like(self.values[name])
        step = Step(k * n + self.rank, TRAIN, None, True)
        batch = self.data.batch(step.iteration)
        batch.update(scale_feed(self.micro, step))
        loss = self._run(self.micro, batch)
        mine = [self.values[name] for name in self.accumulators]
        summed = unflatten(self.reduce(flatten(mine)), mine)
        self.values.update(zip(self.accumulators, summed))
        self._run(self.update, scale_feed(self.update, step))
        self.iteration += 1
        return loss

    def instruction_timings(self) -> list[tuple[int, int, float, float]]:
        """One ``step`` with the backend timing each instruction it runs: (stream, what, start,
        end) per instruction, ``what`` the node of a compute, the bytes of a copy, -1 for an
        all-reduce (``Instrumented.timings`` of the cpu backend), for the Program's graph (``spec.in_program``): a
        profile measured as the ranks train (bench.ranks_measured)."""
        (made,) = self._made
        backend = made.backend
        if backend is None or not hasattr(backend, "timings"):
            raise UsageError("instruction_timings: this rank runs on no backend that times its instructions "
                             "(the cpu backend does)")
        backend.timings = []
        try:
            self.step()
            return list(backend.timings)
        finally:
            backend.timings = None

    def state(self) -> dict[str, np.ndarray]:
        """Every persistent tensor by name, the accumulators left out (zeroed before each step)."""
        return {k: v for k, v in self.values.items() if k not in self.accumulators}

    def load(self, values: dict[str, np.ndarray], iteration: int) -> None:
        self.values.update(values)
        self.iteration = iteration

    def close(self) -> None:
        for m in self._made:
            m.__exit__(None, None, None)


def rank_data(spec: RankSpec, micro: Graph, arrays: dict[str, np.ndarray] | None):
    """What a rank's micro graph trains on (``batch(i)``: tensor id -> array): the synthetic
    teacher's data, or the user's ``arrays`` (--data) drawn as one rank accumulating ``spec.world``
    micro-batches draws them: rank r's shard at step k is micro-batch k*N + r of the data set
    (``data.batch_indices`` at the shard's size). DataError (one line) for arrays that do not fit
    the model's inputs."""
    if arrays is None:
        return TeacherData(micro, spec.seed)
    return _ByName(ArrayData(whole_graph(spec), arrays, spec.seed, "--data"), micro)


class _ByName:
    """A data set checked against one graph (the model's: the user's arrays name its inputs) feeding
    the leaves of the same names in another (the micro graph, whose loss scale is no data)."""

    def __init__(self, data: DataSet, into: Graph):
        ids = {into.tensors[t].name: t for t in into.leaves(Kind.INPUT, Kind.LABEL)}
        self.data, self.samples = data, data.samples
        self._ids = {t: ids[data.g.tensors[t].name] for t in data.data}

    def batch(self, iteration: int) -> dict[int, np.ndarray]:
        return {self._ids[t]: a for t, a in self.data.batch(iteration).items()}


def reduced_names(update: Graph) -> list[str]:
    """The tensors the reduced gradients decide: parameters and optimizer state (the update
    graph's persistent tensors, its accumulators left out)."""
    acc = set(accumulators(update))
    return [update.tensors[t].name for t in update.leaves(*PERSISTENT_KINDS) if t not in acc]


def resume_values(spec: RankSpec, path: str) -> tuple[dict[str, np.ndarray], int]:
    """(values by name, the step to continue from) of a checkpoint rank 0 wrote for this run;
    CheckpointError (one line) when it was written for other ranks, another model or settings."""
    from ..checkpoint import read
    from ..training import CheckpointError

    header, arrays = read(path)
    micro, update = rank_graphs(spec)
    saved = header.get("settings", {}).get("ranks") if isinstance(header.get("settings"), dict) else None
    if saved != spec.world:
        raise CheckpointError(f"checkpoint '{path}' was written by {saved or 'a run without'} ranks; resume it with "
                              f"--ranks {saved}" if saved else f"checkpoint '{path}' was not written by --ranks; "
                              "resume it without --ranks")
    acc = {micro.tensors[t].name for t in accumulators(micro)}
    values = {}
    for g in (micro, update):
        for t in g.leaves(*PERSISTENT_KINDS):
            x = g.tensors[t]
            if x.name in acc:
                continue
            a = arrays.get(x.name)
            if a is None or a.shape != x.shape or a.dtype != x.dtype:
                raise CheckpointError(f"checkpoint '{path}': tensor '{x.name}' is missing or has the wrong shape or "
                                      f"dtype (want {x.shape} {x.dtype}); use the model flags it was written with")
            values[x.name] = a
    step = header.get("iteration")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise CheckpointError(f"checkpoint '{path}': bad iteration count {step!r:.40}")
    return values, step


def one_rank_accumulating(spec: RankSpec, steps: int, arrays: dict[str, np.ndarray] | None = None
                          ) -> dict[str, np.ndarray]:
    """The exact mode's reference: one rank (the numpy reference interpreter, unlimited memory)
    running ``steps`` updates, each accumulating ``spec.world`` micro-batches in order (of
    ``arrays``, the user's data, where given), through the changing-graph trainer
    (engine.training.StreamTrainer); its parameters and optimizer state by name."""
    micro, update = rank_graphs(spec)
    from ..training import ReferenceRunner

    graphs = _Fixed(micro, update)
    runners = {micro: ReferenceRunner(micro), update: ReferenceRunner(update)}
    trainer = StreamTrainer(graphs, IterationPlan(StreamSettings(accumulate=spec.world, seed=spec.seed)),
                            runners.__getitem__, spec.seed, data={micro: rank_data(spec, micro, arrays)})
    for _ in range(steps * spec.world):
        trainer.step()
    acc = {micro.tensors[t].name for t in accumulators(micro)}
    return {k: v for k, v in trainer.named_state().items() if k not in acc}


class _Fixed:
    """The two graphs of ``rank_graphs`` as ``StreamTrainer`` asks for them."""

    def __init__(self, micro: Graph, update: Graph):
        self._micro, self._update = micro, update

    def micro(self, seq):
        return self._micro

    def update(self, like):
        return self._update

