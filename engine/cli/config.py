"""The run's configuration, made once from the parsed flags and frozen.

Nothing below the command line sees argparse's namespace: ``RunConfig.from_args`` turns it
into typed, immutable settings (policies resolved from their registry), and the run
passes those, or the few values a function needs, down.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

from planner import policy as policies_registry
from planner.policy import RECOMPUTE_OPTION, Policy

# The request option --window sets (a policy that reads it lists it in Policy.options).
WINDOW_OPTION = "window"
CHECKPOINT_EVERY = 50      # --checkpoint-every's default


@dataclass(frozen=True)
class SearchSettings:
    seconds: float            # 0 with no generations: no search
    generations: int | None
    population: int
    workers: int | None
    checkpoint: str | None
    resume: bool
    ray_address: str | None = None   # evaluate on Ray (ga/ray_workers.py) instead of local processes

    @property
    def wanted(self) -> bool:
        return bool(self.seconds or self.generations)


@dataclass(frozen=True)
class RunConfig:
    model: str
    batch: int | None
    size: int | None
    dtype: str
    iterations: int
    seed: int
    optimizer: str | None              # sgd, adam, adamw; None: the model's own
    lr: float | None                   # None: the optimizer's default
    momentum: float
    weight_decay: float
    memory: int | None                 # device bytes (--memory); None: the default fraction of the peak
    policies: tuple[Policy, ...]       # the last one trains; the others are timed
    measure_iterations: int
    backend: str                       # "auto" or a registered backend
    device: int
    link_gbps: float | None
    profile: str | None                # a device name or a profile file
    save_profile: str | None
    search: SearchSettings
    save_plan: str | None
    load_plan: str | None
    simulate_only: bool
    sanitize: bool
    check: bool                        # compare with the unlimited run
    checkpoint: str | None
    checkpoint_every: int | None       # None: every CHECKPOINT_EVERY (see save_every)
    resume: str | None
    out: str | None
    json: str | None
    quiet: bool
    allocator: str | None = None       # --allocator; None: each policy's own (Policy.allocators[0])
    chunk_bytes: int | None = None     # --chunk-mib in bytes (the va allocator's chunk)
    window: int | None = None          # --window in bytes; None: searched (the window policy's knob)
    swap_only: bool = False            # --swap-only: no recomputation
    data: str | None = None            # --data FILE.npz: the user's arrays instead of synthetic data
    save_weights: str | None = None    # --save-weights: the trained parameters, safetensors or npz
    overwrite: bool = False            # --overwrite: --out may hold an earlier run
    ranks: int = 1                     # --ranks: data-parallel ranks on Ray (engine/cli/ranks.py)

    @classmethod
    def from_args(cls, a: argparse.Namespace) -> RunConfig:
        return cls(
            model=a.model, batch=a.batch, size=a.size, dtype=a.dtype, iterations=a.iterations, seed=a.seed,
            optimizer=a.optimizer, lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay, memory=a.memory,
            policies=tuple(policies_registry.get(name) for name in a.policy),
            measure_iterations=a.measure_iterations, backend=a.backend, device=a.device, link_gbps=a.link_gbps,
            profile=a.profile, save_profile=a.save_profile,
            search=SearchSettings(a.search_seconds, a.search_generations, a.population, a.workers,
                                  a.search_checkpoint, a.resume_search, a.ray_address),
            save_plan=a.save_plan, load_plan=a.load_plan, simulate_only=a.simulate_only, sanitize=a.sanitize,
            check=not a.no_check, checkpoint=a.checkpoint, checkpoint_every=a.checkpoint_every, resume=a.resume,
            out=a.out, json=a.json, quiet=a.quiet, allocator=a.allocator,
            chunk_bytes=None if a.chunk_mib is None else int(round(a.chunk_mib * 2**20)), window=a.window,
            swap_only=a.swap_only, data=a.data, save_weights=a.save_weights, overwrite=a.overwrite,
            ranks=getattr(a, "ranks", 1))

    def allocator_of(self, policy: Policy) -> tuple[str, dict]:
        """The allocator ``policy`` places tensors with (--allocator, or its own default; a policy
        that needs no budget keeps its own) and the options it is made with."""
        name = policy.placed_by(self.allocator if policy.needs_budget else None)
        options = {"chunk_bytes": self.chunk_bytes} if self.chunk_bytes and name == self.allocator else {}
        return name, options

    @property
    def policy_options(self) -> dict:
        """PlanRequest.policy_options: the policies' own knobs (each reads those it knows)."""
        return {WINDOW_OPTION: "auto" if self.window is None else self.window,
                **({RECOMPUTE_OPTION: 0.0} if self.swap_only else {})}

    @property
    def checkpoint_settings(self) -> dict:
        """What a checkpoint records beside the seed, so that --resume can refuse other values
        (it would continue silently on other data or another optimizer)."""
        return {"model": self.model, "dtype": self.dtype, "optimizer": self.optimizer, "lr": self.lr,
                "momentum": self.momentum,
                "weight_decay": self.weight_decay}

    @property
    def save_every(self) -> int:
        """Iterations between checkpoints (--checkpoint-every, or its default)."""
        return self.checkpoint_every or CHECKPOINT_EVERY

    @property
    def planned(self) -> tuple[Policy, ...]:
        """The policies that make a Program (all but the reference interpreter's)."""
        return tuple(p for p in self.policies if p.runs_program)

    @property
    def searching(self) -> Policy | None:
        """The policy whose plan the search, --load-plan and --save-plan are about."""
        return next((p for p in self.planned if p.searches), None)
