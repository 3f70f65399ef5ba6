"""Data-parallel ranks as Ray actors: one ``RankTrainer`` (ranks.py) each, the gradient
accumulators all-reduced through Ray's collective library.

The collective is ``ray.util.collective`` with its gloo backend (in Ray 2.60 that is
torch.distributed's gloo, no pygloo needed): each bucket is all-gathered, then every rank adds
the N parts in rank order (``ranks.rank_order_sum``), so every rank holds the same bits
whatever the timing, and they are the bits of one rank accumulating the N micro-batches.
(gloo's own allreduce is deterministic for a given N too, but its ring adds the parts in an
order that depends on the chunk, which no single rank reproduces.)

The driver runs the ranks a step at a time (one call per rank per step), so it sees each
step's losses, writes checkpoints from rank 0 alone, and notices a rank that died: the run
stops in one line naming it (``RankDied``), the other ranks killed rather than left waiting
in the collective.
"""
from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import EngineError
from .ranks import RankPlans, RankSpec, RankTrainer, plan_ranks, rank_order_sum

OBJECT_STORE_BYTES = 128 * 2**20   # a local Ray's store: states come back through it, gradients do not


class RankDied(EngineError, RuntimeError):
    """A rank's actor ended during the run."""


class RankFailed(EngineError, RuntimeError):
    """A rank refused its work (an EngineError there, e.g. a plan that does not verify)."""


class _Rank:
    """One rank's actor (made remote by ``start_ranks``)."""

    def __init__(self, spec: RankSpec, rank: int, group: str, plans: RankPlans | None,
                 arrays: dict[str, np.ndarray] | None = None):
        self.spec, self.rank, self.group, self.plans, self.arrays = spec, rank, group, plans, arrays
        self.trainer = None

    def setup(self) -> dict:
        if self.spec.world > 1:
            import ray.util.collective as col

            col.init_collective_group(self.spec.world, self.rank, backend="gloo", group_name=self.group)
        self.trainer = RankTrainer(self.spec, self.rank, self._reduce, self.plans, self.arrays)
        self.arrays = None              # ArrayData keeps what it needs
        return {"pid": os.getpid(), "node": _node(), "plans": self.plans.digests() if self.plans else None}

    def _reduce(self, buckets: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        world = self.spec.world
        if world == 1:
            return {k: rank_order_sum([v]) for k, v in buckets.items()}
        import ray.util.collective as col

        out = {}
        for k, mine in buckets.items():
            parts = [np.empty_like(mine) for _ in range(world)]
            col.allgather(parts, mine, group_name=self.group)
            out[k] = rank_order_sum(parts)
        return out

    def step(self) -> float:
        return self.trainer.step()

    def timed_step(self) -> dict:
        """``step`` with its times on this rank: wall and CPU seconds of the whole step, and the
        wall seconds inside the Programs (bench.ranks_measured)."""
        wall, cpu, program = time.perf_counter(), time.process_time(), self.trainer.program_seconds
        loss = self.trainer.step()
        return {"loss": loss, "wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                "program": self.trainer.program_seconds - program}

    def instruction_timings(self) -> list[tuple[int, int, float, float]]:
        """A step with each instruction timed on this rank (``RankTrainer.instruction_timings``)."""
        return self.trainer.instruction_timings()

    def clock(self) -> float:
        """This rank's CPU seconds so far: an empty call, whose round trip is Ray's per-call cost."""
        return time.process_time()

    def state(self) -> dict[str, np.ndarray]:
        return self.trainer.state()

    def load(self, values: dict[str, np.ndarray], iteration: int) -> None:
        self.trainer.load(values, iteration)

    def close(self) -> None:
        self.trainer.close()


def connect(address: str, world: int):
    """Ray for ``address`` (ga/ray_workers.py's forms); 'local' starts one here with a CPU per
    rank and a small object store, unless this process already has Ray running."""
    from ga.ray_workers import _ray, connect as connect_cluster, local_runtime_env

    ray = _ray()
    if address == "local" and not ray.is_initialized():
        ray.init(num_cpus=world, object_store_memory=OBJECT_STORE_BYTES, include_dashboard=False,
                 log_to_driver=False, configure_logging=False, runtime_env=local_runtime_env())
        return ray
    return connect_cluster(address, None)


@dataclass
class Ranks:
    """The running actors, rank-ordered."""
    ray: object
    actors: list
    info: list[dict] = field(default_factory=list)

    def call(self, method: str, *args) -> list:
        """Every rank's ``method(*args)``, in rank order; RankDied naming the first rank found
        dead (the others are killed: a survivor would wait in the collective)."""
        ray, world = self.ray, len(self.actors)
        refs = [getattr(a, method).remote(*args) for a in self.actors]
        rank_of = {ref: r for r, ref in enumerate(refs)}
        results: dict[int, object] = {}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            r = rank_of[ready[0]]
            try:
                results[r] = ray.get(ready[0])
            except ray.exceptions.RayActorError as e:
                self.close()
                raise RankDied(f"rank {r} of {world} died during {method} "
                               f"({type(e).__name__}); the run stopped") from None
            except ray.exceptions.RayTaskError as e:
                dead = self._dead(pending, rank_of)     # a survivor's collective failing because a peer died
                self.close()            # the others would wait in the collective for it
                if dead is not None:
                    raise RankDied(f"rank {dead} of {world} died during {method} (its peers' collective failed "
                                   "with it); the run stopped") from None
                if isinstance(e.cause, EngineError):     # a refusal in one line; anything else is a bug
                    raise RankFailed(f"rank {r} of {world}: {e.cause}") from None
                raise
        return [results[r] for r in range(len(self.actors))]

    def _dead(self, pending: list, rank_of: dict, seconds: float = 10.0) -> int | None:
        """The first rank among ``pending`` calls whose actor turns out dead within ``seconds``."""
        ray = self.ray
        if not pending:
            return None
        ready, _ = ray.wait(pending, num_returns=len(pending), timeout=seconds)
        for ref in sorted(ready, key=rank_of.get):
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError:
                return rank_of[ref]
            except ray.exceptions.RayTaskError:
                continue
        return None

    def rank0(self, method: str, *args):
        """Rank 0's ``method(*args)`` alone (the state a checkpoint writes once)."""
        world = len(self.actors)
        ref = getattr(self.actors[0], method).remote(*args)
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayActorError as e:
            self.close()
            raise RankDied(f"rank 0 of {world} died during {method} ({type(e).__name__}); "
                           "the run stopped") from None

    def close(self) -> None:
        for a in self.actors:
            try:
                self.ray.kill(a)
            except Exception:       # already gone
                pass
        self.actors = []


def _node() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()[:12]


def start_ranks(spec: RankSpec, plans: RankPlans | None, address: str = "local",
                arrays: dict[str, np.ndarray] | None = None) -> Ranks:
    """N actors, each set up (collective group joined, the driver's Programs admitted and their
    executors made, the user's ``arrays`` to draw its shards from, else the synthetic data);
    RankDied if one fails to start. One plan for every rank, made once."""
    ray = connect(address, spec.world)
    group = f"ranks-{uuid.uuid4().hex[:12]}"
    remote = ray.remote(num_cpus=1)(_Rank)
    shared, data = ray.put(plans), ray.put(arrays)     # one copy in the object store, not one per actor
    ranks = Ranks(ray, [remote.remote(spec, r, group, shared, data) for r in range(spec.world)])
    ranks.info = ranks.call("setup")
    return ranks


def train_ranks(spec: RankSpec, iterations: int, address: str = "local",
                after_step: Callable[[int, list[float], Ranks], None] | None = None,
                start: tuple[dict, int] | None = None, plans: RankPlans | None = None,
                arrays: dict[str, np.ndarray] | None = None
                ) -> tuple[dict[str, np.ndarray], list[list[float]], Ranks]:
    """Run ``iterations`` data-parallel steps (from ``start``: (values, iteration) of a checkpoint);
    return rank 0's state, each step's losses by rank, and the ranks (closed). ``plans``: the
    Programs (None: ``plan_ranks(spec)``, on this process); ``arrays``: the user's data (--data).
    ``after_step(iteration, losses, ranks)`` hears each step (the driver's checkpoints:
    ``ranks.rank0("state")``)."""
    plans = plans if plans is not None else plan_ranks(spec)
    ranks = start_ranks(spec, plans, address, arrays)
    try:
        first = 0
        if start is not None:
            values, first = start
            ranks.call("load", values, first)
        losses = []
        for k in range(first, iterations):
            losses.append(ranks.call("step"))
            if after_step is not None:
                after_step(k + 1, losses[-1], ranks)
        state = ranks.call("state")[0]
        return state, losses, ranks
    finally:
        ranks.close()
