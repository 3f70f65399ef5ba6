"""`python -m engine.train --ranks N`: data-parallel training on N Ray actors
(engine/library/ranks.py and ray_ranks.py), on a local Ray by default or the cluster
--ray-address names.

What it takes: the model flags, --batch (the whole batch, cut into N shards), --iterations,
--seed, the optimizer's flags, --memory (per rank), the last --policy (it plans each rank's two
graphs once; every rank runs those Programs), --profile, --backend cpu, --sanitize, --checkpoint
(written once, from rank 0), --resume (every rank loads rank 0's checkpoint), --data (each rank
draws its shard of each batch from the user's arrays), --search-seconds/--search-generations (the
search of each rank graph's plan on the driver, under the profile's shared host) and --no-check.
What it does not take yet is refused in one line.
"""
from __future__ import annotations

import time

import numpy as np

from .. import backend_registry, checkpoint
from ..errors import EngineError, UsageError
from ..units import format_bytes
from ..library.models import batch_of, model_graph
from ..library.ranks import (RankSpec, check_spec, one_rank_accumulating, plan_ranks, rank_graphs, reduced_names,
                             resume_values, whole_graph)
from ..library.ray_ranks import train_ranks
from ..library.planning import profile_of
from .config import RunConfig
from .user_files import check_user_files, data_for

# RunConfig fields that --ranks does not act on yet, and the flag that set each
NOT_WITH_RANKS = (("simulate_only", "--simulate-only"),
                  ("save_weights", "--save-weights"), ("load_plan", "--load-plan"), ("save_plan", "--save-plan"),
                  ("allocator", "--allocator"), ("window", "--window"), ("swap_only", "--swap-only"))


def spec_of(cfg: RunConfig):
    given = next((flag for field, flag in NOT_WITH_RANKS if getattr(cfg, field)), None)
    if given:
        raise UsageError(f"{given} is not available with --ranks yet; leave it out, or train on one device "
                         "without --ranks")
    try:
        placement = backend_registry.choose(cfg.backend, cfg.device, cfg.link_gbps)
    except backend_registry.BackendUnavailable as e:
        raise UsageError(str(e)) from None
    if placement.kind.numbered_devices:     # a device per rank (Ray's num_gpus) is not wired yet
        raise UsageError(f"--ranks runs each rank on the cpu backend for now, not the {placement.kind.name} "
                         "backend; give --backend cpu")
    policy = cfg.policies[-1]
    search = None
    if cfg.search.wanted and policy.searches:
        from ga.search import SearchOptions

        s = cfg.search           # on the driver's processes: the ranks' Ray starts after the plan
        search = SearchOptions(population=s.population, seed=cfg.seed, workers=s.workers,
                               time_limit_s=s.seconds or None, max_generations=s.generations, progress=False)
    batch = cfg.batch or batch_of(model_graph(cfg.model, None, cfg.size, cfg.dtype, cfg.optimizer, cfg.lr))
    spec = RankSpec(cfg.model, batch, cfg.ranks, cfg.size, cfg.dtype, cfg.optimizer, cfg.lr, cfg.momentum,
                    cfg.weight_decay, cfg.seed, policy.name if policy.needs_budget and policy.runs_program else None,
                    cfg.memory, cfg.profile or "v100", placement.kind.name, 0, cfg.link_gbps, cfg.sanitize,
                    search=search)
    check_spec(spec)
    return spec


def describe_search(cfg: RunConfig) -> str:
    """The search's limits in words: '10 s or 2 generations'."""
    s = cfg.search
    return " or ".join(x for x in (f"{s.seconds:g} s" if s.seconds else "",
                                   f"{s.generations} generations" if s.generations else "") if x)


def train(cfg: RunConfig, report) -> int:
    """The data-parallel run; its exit status."""
    spec = spec_of(cfg)
    arrays = check_user_files(cfg)
    micro, update = rank_graphs(spec)
    if arrays is not None:
        data = data_for(cfg, whole_graph(spec), arrays)    # one line for arrays the model cannot take, before Ray
        print(f"data   --data {cfg.data}: {data.samples} samples; rank r's shard at step k is micro-batch "
              f"k*{spec.world}+r of {spec.shard} (as one rank accumulating {spec.world} micro-batches draws them)")
    print(f"ranks  {spec.world} on Ray ({cfg.search.ray_address or 'local'}), each {cfg.model} at batch "
          f"{spec.shard} of {spec.batch} on the {spec.backend} backend; gradients all-gathered "
          "(ray.util.collective, gloo) "
          f"and added in rank order: the bits of one rank accumulating {spec.world} micro-batches")
    plans = plan_ranks(spec)
    if spec.search is not None and plans is not None:
        shared = profile_of(spec.profile).host
        print(f"search {spec.policy}'s plan of each of the {len(plans.programs)} rank graph(s) on the driver, "
              f"{describe_search(cfg)} each, its fitness the simulator on {spec.profile}"
              + (f" with {shared.ranks} ranks sharing {shared.bytes_per_s / 1e9:g} GB/s of host" if shared else "")
              + f": the searched plan is faster for {plans.searched} of {len(plans.programs)} (one plan for "
              "every rank)")
    if plans is not None:
        print(f"plan   {spec.policy} under {format_bytes(plans.device_bytes)} per rank: simulated "
              f"{sum(plans.seconds):.4f} s per step on {spec.profile} (the same Programs on "
              "every rank)")
    stamps: list[float] = []

    def after(iteration: int, losses: list[float], ranks) -> None:
        stamps.append(time.perf_counter())
        if cfg.checkpoint and (iteration % cfg.save_every == 0 or iteration == cfg.iterations):
            save(cfg, micro.name, iteration, ranks.rank0("state"))

    start = resume_values(spec, cfg.resume) if cfg.resume else None
    if start is not None and start[1] >= cfg.iterations:
        raise UsageError(f"--resume {cfg.resume} is at step {start[1]}, --iterations {cfg.iterations}: nothing to "
                         "train; give more --iterations")
    if start is not None:
        print(f"resumed from {cfg.resume} at step {start[1]}; {max(0, cfg.iterations - start[1])} to go")
    started = time.perf_counter()
    state, losses, _ = train_ranks(spec, cfg.iterations, cfg.search.ray_address or "local", after, start, plans,
                                   arrays)
    mean = [float(np.mean(step)) for step in losses]
    written = ", checkpoints included" if cfg.checkpoint else ""
    steps = np.diff(stamps) if len(stamps) > 1 else np.array([stamps[0] - started])
    print(f"train  {len(losses)} steps on {spec.world} ranks: loss {mean[0]:.3f} -> {mean[-1]:.3f} (mean over "
          f"ranks), {float(np.median(steps)):.4f} s per step (median wall{written}; "
          f"{stamps[0] - started:.1f} s to start Ray and the ranks and run the first)")
    if cfg.checkpoint:
        print(f"checkpoint saved to {cfg.checkpoint} by rank 0 (step {len(losses)})")
    same = None
    if cfg.check:           # from step 0: a resumed run must land on the same bits
        one = one_rank_accumulating(spec, cfg.iterations, arrays)
        names = reduced_names(update)
        same = all(np.array_equal(one[n], state[n], equal_nan=True) for n in names)
        print(f"parameters identical to one rank accumulating {spec.world} micro-batches in rank order "
              f"(unlimited memory): {'yes (bit for bit)' if same else 'NO'}")
    report.update(model=micro.name, batch=spec.batch, ranks=spec.world, iterations=len(losses),
                  loss_first=mean[0], loss_last=mean[-1], identical=same,
                  budget_bytes=plans.device_bytes if plans else None)
    return 1 if same is False else 0


def save(cfg: RunConfig, graph: str, iteration: int, state: dict) -> None:
    """Rank 0's state, written once (atomic, as every checkpoint)."""
    try:
        checkpoint.write(cfg.checkpoint, {"graph": graph, "iteration": iteration, "seed": cfg.seed,
                                          "settings": {**cfg.checkpoint_settings, "ranks": cfg.ranks}}, state)
    except OSError as e:
        raise EngineError(f"--checkpoint {cfg.checkpoint}: could not be written at step {iteration} "
                          f"({e.strerror or e}); training stopped there") from None
