"""One graph's SmartSwap plan: Algorithm 2 at a memory target, release points, placement;
the target lowered while the online allocator finds no room."""
from __future__ import annotations

import math

import numpy as np

from engine.ir import PERSISTENT_KINDS
from engine.liveness import live_bytes_per_step
from engine.program import Program
from engine.schedules import updates_when_ready

from ..errors import OutOfRoom, PlanError
from ..facts import GraphFacts
from ..online_program import online_allocator
from ..policy import PlanRequest
from ..simulate import simulate
from .algorithm2 import Algorithm2
from .build import build_program
from .candidates import Storage
from .layers import LAYERS, logical_layers, phases
from .release_points import queued_extra, queued_releases
from .stays import Stay, kept_values, stays

# Eq. 2's weight of size against MREs covered. The paper gives no value. Measured with the eager
# order and the oldest-block placement below, on the micro-steps and updates of bench.smartswap's
# streams at 1/4 of their peak (simulated s, summed over each stream's 60 iterations, 2026-11-24):
# C = 0, 0.25, 1: 7B 1322.8, 1309.7, 1233.6; GPT-2 XL 486.5, 480.5, 475.9.
C_DEFAULT = 1.0
# The order a plan runs: "eager", as an eager framework runs the iteration (each gradient added into
# its accumulator, each state updated, as soon as it is ready: PyTorch's autograd accumulates into
# .grad during the backward pass), or "given", the graph's insertion order, which leaves every
# accumulation after the whole backward pass: a link-bound tail where each accumulator comes in and
# goes out. Placement: "oldest" (best fit, but among free blocks up to twice the best fit's size the
# one freed earliest: ``allocator.bestfit``'s oldest_within=1), or "bestfit" (PyTorch's). Measured
# as C above (C = 1): eager + oldest 1233.6 and 475.9; given + oldest 1351.0 and 468.4; given +
# bestfit 1402.2 and 467.6; eager + bestfit 1411.9 and 514.1, its swap-ins queued behind copies
# into bytes just given back. (Given, bestfit, C = 0.25, this module's defaults before: 1347.4 and
# 478.7.) GenPolicy's alternatives (engine/library/stream_plans.py) cover GPT-2 XL's preference.
ORDERS = ("eager", "given")
PLACEMENTS = {"oldest": 1.0, "bestfit": None}     # name -> allocator.bestfit's oldest_within
FIRST_TARGET = 0.97  # of the pool: Algorithm 2's first target (the allocator needs some slack)
TARGET_STEP = 0.05   # lowered by this much of the pool while a stay finds no room
TRIES = 12


class NoRoom(OutOfRoom):
    """No target Algorithm 2 was tried at gave stays the online allocator could place."""


class SmartSwapPlan:
    """The decisions for one graph (which stays leave the device, when they come back), then
    the Program. ``c``: Eq. 2's C; ``per_phase``: logical layers per phase; ``reserve``: the
    share of the bytes that the copy queues' release points hold longer which Algorithm 2 sheds
    beforehand (0: none, it sheds for the layer simulator's release points only); ``order`` and
    ``placement``: see ``ORDERS`` and ``PLACEMENTS``."""

    def __init__(self, request: PlanRequest, c: float = C_DEFAULT, per_phase: int = LAYERS,
                 reserve: float = 0.0, order: str = "eager", placement: str = "oldest"):
        if order not in ORDERS or placement not in PLACEMENTS:
            raise PlanError(f"smartswap: order must be one of {', '.join(ORDERS)} and placement one of "
                            f"{', '.join(PLACEMENTS)} (got order '{order}', placement '{placement}')")
        self.request = request
        self.g, self.facts, self.budget = request.graph, request.facts, request.budget
        if order == "eager":
            eager = updates_when_ready(self.g, PERSISTENT_KINDS)
            if eager != list(self.facts.order):
                self.facts = GraphFacts(self.g, eager)
        self.placement = placement
        self.order = list(self.facts.order)
        n = len(self.order)
        secs = request.op_seconds
        self.iteration_seconds = float(np.sum(secs)) if secs is not None else float(n)
        link = request.profile.link if request.profile is not None else None
        self.bw = link.h2d_bytes_per_s if link else math.inf
        self.bw_out = link.d2h_bytes_per_s if link else math.inf
        self.latency_s = link.latency_s if link else 0.0
        self.phase = phases(self.g, self.order)
        self.layers = logical_layers(self.phase, self.iteration_seconds, per_phase)
        self.c, self.reserve = c, reserve
        self.trace = live_bytes_per_step(self.g, self.order, self.facts.lifetimes).astype(np.int64)
        self.pool = int(self.budget.pool_bytes)
        self.algorithm2 = Algorithm2(self.g, self.order, self.facts.lifetimes, self.layers, self.trace,
                                     self.bw, self.bw_out, c, self.latency_s)
        self.kept = kept_values(self.g)
        self.target = FIRST_TARGET   # of the pool: Algorithm 2's target in ``make``
        self.queued = False          # whether ``make`` released at the copy queues' points

    def decide(self, limit: int) -> list[Storage]:
        """Algorithm 2 at ``limit`` pool bytes (again with ``reserve`` of the bytes the copy
        queues' release points would hold longer): storages with their gaps chosen."""
        stores, self.shed_trace = self.algorithm2.run(limit)
        if self.reserve > 0:
            first = self.stays_for(stores, queued=False)
            extra = queued_extra(first, len(self.order), self.layers.op_seconds, self.bw, self.bw_out,
                                 self.latency_s)
            stores, self.shed_trace = self.algorithm2.run(limit, (extra * self.reserve).astype(np.int64))
        return stores

    def stays_for(self, stores: list[Storage], release_at_sync: bool = False, queued: bool = False) -> list[Stay]:
        """The stays of ``stores``, released at the layer simulator's points, at the copy
        queues' (``queued``, holding at most the current target's bytes) or at the next
        synchronization (``release_at_sync``)."""
        n = len(self.order)
        out = stays(stores, n, self.kept, release_at_sync)
        if queued and not release_at_sync:
            queued_releases(out, n, self.layers.op_seconds, self.bw, self.bw_out, int(self.pool * self.target),
                            self.latency_s)
        return out

    def program(self, stays: list[Stay], allocator=None) -> Program | None:
        """The Program placing ``stays`` with the request's online allocator (or ``allocator``);
        None if a stay finds no room."""
        alloc = allocator if allocator is not None else self.allocator()
        return build_program(self.g, self.order, self.facts.lifetimes, self.budget.scratch_bytes, stays, alloc)

    def allocator(self):
        """The request's online allocator over the pool (bestfit, placing as ``placement`` says,
        unless the request names va)."""
        return online_allocator(self.request, oldest_within=PLACEMENTS[self.placement])

    def make(self) -> Program:
        """Algorithm 2, then placement twice, releasing where the copy queues say (within the
        target) and at the layer simulator's points, keeping the faster that fits (as GenPolicy
        keeps the fastest of its policies; without a profile, the first that fits); while neither
        fits (the allocator fragments the pool), Algorithm 2 again at a target lowered by
        ``TARGET_STEP`` of the pool, at most ``TRIES`` times. All that with the link's fixed cost
        per copy in Eq. 3, then, if nothing fit, without it (the paper's Eq. 3: near the smallest
        budget that runs, the later release points the fixed cost gives hold bytes the pool lacks),
        then releasing each copy out's bytes where it is issued (the first write into them waits
        for the copy, ``build``'s reuse edges: stalls, but a small model's short operators make the
        layer simulator's release points many steps late); NoRoom if it never fits."""
        for latency_s, bw_out in dict.fromkeys([(self.latency_s, self.bw_out), (0.0, self.bw_out), (0.0, math.inf)]):
            self._copy_costs(latency_s, bw_out)
            target = FIRST_TARGET
            for _ in range(TRIES):
                self.target = target
                self.stores = self.decide(int(self.pool * target))
                made = []
                for queued in (True, False):
                    prog = self.program(self.stays_for(self.stores, queued=queued))
                    if prog is not None:
                        made.append((self.seconds(prog), queued, prog))
                if made:
                    _, self.queued, prog = min(made, key=lambda m: m[0])
                    return prog
                target -= TARGET_STEP
        raise NoRoom(f"smartswap could not fit '{self.g.name}' in a pool of {self.pool} bytes "
                     f"(shed down to {target + TARGET_STEP:.2f} of it); give a larger --memory")

    def _copy_costs(self, latency_s: float, bw_out: float) -> None:
        """The link figures the decisions and release points use from now on (this plan's and
        its Algorithm 2's: one setting, kept in both)."""
        self.latency_s = self.algorithm2.latency_s = latency_s
        self.bw_out = self.algorithm2.bw_out = bw_out

    def seconds(self, prog: Program) -> float:
        """``prog``'s simulated time on the request's profile (0 without one)."""
        if self.request.profile is None:
            return 0.0
        return simulate(prog, self.g, self.request.profile, self.request.op_seconds).total

    def arena_needed(self, release_at_sync: bool) -> int:
        """The most bytes the stays of the last ``make`` hold at once (requested, before the
        allocator's rounding), releasing as ``make`` did or at the next synchronization."""
        from allocator.online import make_online_allocator
        alloc = make_online_allocator("bestfit", 1 << 62, oldest_within=PLACEMENTS[self.placement])
        self.program(self.stays_for(self.stores, release_at_sync, self.queued), alloc)
        return int(alloc.stats().peak_requested_bytes)
