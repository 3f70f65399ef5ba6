"""One graph's SmartSwap plan: Algorithm 2 at a memory target, release points, placement;
the target lowered while the online allocator finds no room."""
from __future__ import annotations

import math

import numpy as np

from engine.liveness import live_bytes_per_step
from engine.program import Program

from ..errors import PlanError
from ..online_program import online_allocator
from ..policy import PlanRequest
from .algorithm2 import Algorithm2
from .build import build_program
from .candidates import Storage
from .layers import LAYERS, logical_layers, phases
from .release_points import queued_extra, queued_releases
from .stays import Stay, kept_values, stays

# Eq. 2's weight of size against MREs covered. The paper gives no value; measured on the largest
# micro-step of GPT-2 XL and the 7B preset at 1/4 of their peak (bench/results/smartswap_2026-11-24.txt,
# with the copy queues' release points), C = 0, 0.25, 0.5, 1, 2, 4: 12.79, 12.72, 12.60, 12.56, 12.50,
# 12.52 s and 29.20, 29.20, 32.46, 32.27, 31.77, 31.59 s. 0.25 is the best on the 7B (by 8% over
# C >= 0.5) and 1.7% from GPT-2 XL's best.
C_DEFAULT = 0.25
FIRST_TARGET = 0.97  # of the pool: Algorithm 2's first target (the allocator needs some slack)
TARGET_STEP = 0.05   # lowered by this much of the pool while a stay finds no room
TRIES = 12


class SmartSwapPlan:
    """The decisions for one graph (which stays leave the device, when they come back), then
    the Program. ``c``: Eq. 2's C; ``per_phase``: logical layers per phase; ``reserve``: the
    share of the bytes that the copy queues' release points hold longer which Algorithm 2 sheds
    beforehand (0: none, it sheds for the layer simulator's release points only)."""

    def __init__(self, request: PlanRequest, c: float = C_DEFAULT, per_phase: int = LAYERS,
                 reserve: float = 0.0):
        self.request = request
        self.g, self.facts, self.budget = request.graph, request.facts, request.budget
        self.order = list(self.facts.order)
        n = len(self.order)
        secs = request.op_seconds
        self.iteration_seconds = float(np.sum(secs)) if secs is not None else float(n)
        link = request.profile.link if request.profile is not None else None
        self.bw = link.h2d_bytes_per_s if link else math.inf
        self.bw_out = link.d2h_bytes_per_s if link else math.inf
        self.phase = phases(self.g, self.order)
        self.layers = logical_layers(self.phase, self.iteration_seconds, per_phase)
        self.c, self.reserve = c, reserve
        self.trace = live_bytes_per_step(self.g, self.order, self.facts.lifetimes).astype(np.int64)
        self.pool = int(self.budget.pool_bytes)
        self.algorithm2 = Algorithm2(self.g, self.order, self.facts.lifetimes, self.layers, self.trace,
                                     self.bw, self.bw_out, c)
        self.kept = kept_values(self.g)
        self.target = FIRST_TARGET   # of the pool: Algorithm 2's target in ``make``
        self.queued = False          # whether ``make`` released at the copy queues' points

    def decide(self, limit: int) -> list[Storage]:
        """Algorithm 2 at ``limit`` pool bytes (again with ``reserve`` of the bytes the copy
        queues' release points would hold longer): storages with their gaps chosen."""
        stores, self.shed_trace = self.algorithm2.run(limit)
        if self.reserve > 0:
            first = self.stays_for(stores, queued=False)
            extra = queued_extra(first, len(self.order), self.layers.op_seconds, self.bw, self.bw_out)
            stores, self.shed_trace = self.algorithm2.run(limit, (extra * self.reserve).astype(np.int64))
        return stores

    def stays_for(self, stores: list[Storage], release_at_sync: bool = False, queued: bool = False) -> list[Stay]:
        """The stays of ``stores``, released at the layer simulator's points, at the copy
        queues' (``queued``, holding at most the current target's bytes) or at the next
        synchronization (``release_at_sync``)."""
        n = len(self.order)
        out = stays(stores, n, self.kept, release_at_sync)
        if queued and not release_at_sync:
            queued_releases(out, n, self.layers.op_seconds, self.bw, self.bw_out, int(self.pool * self.target))
        return out

    def program(self, stays: list[Stay], allocator=None) -> Program | None:
        """The Program placing ``stays`` with the request's online allocator (or ``allocator``);
        None if a stay finds no room."""
        alloc = allocator if allocator is not None else self.allocator()
        return build_program(self.g, self.order, self.facts.lifetimes, self.budget.scratch_bytes, stays, alloc)

    def allocator(self):
        """The request's online allocator over the pool (bestfit unless it names va)."""
        return online_allocator(self.request, "bestfit")

    def make(self) -> Program:
        """Algorithm 2, then placement, releasing where the copy queues say (within the target)
        or, if that finds no room, at the layer simulator's points; while neither fits (the
        allocator fragments the pool), Algorithm 2 again at a target lowered by ``TARGET_STEP``
        of the pool, at most ``TRIES`` times; PlanError if it never fits."""
        target = FIRST_TARGET
        for _ in range(TRIES):
            self.target = target
            self.stores = self.decide(int(self.pool * target))
            for queued in (True, False):
                prog = self.program(self.stays_for(self.stores, queued=queued))
                if prog is not None:
                    self.queued = queued
                    return prog
            target -= TARGET_STEP
        raise PlanError(f"smartswap could not fit '{self.g.name}' in a pool of {self.pool} bytes "
                        f"(shed down to {target + TARGET_STEP:.2f} of it); give a larger --memory")

    def arena_needed(self, release_at_sync: bool) -> int:
        """The most bytes the stays of the last ``make`` hold at once (requested, before the
        allocator's rounding), releasing as ``make`` did or at the next synchronization."""
        from allocator.online import make_online_allocator
        alloc = make_online_allocator("bestfit", 1 << 62)
        self.program(self.stays_for(self.stores, release_at_sync, self.queued), alloc)
        return int(alloc.stats().peak_requested_bytes)
