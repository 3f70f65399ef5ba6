"""``smartswap``: SmartSwap's policy generator (004 Section 4) and its release points (Section
5.2), without search: logical layers (Eq. 1), the memory reduction list, Eq. 2's candidates,
the layer simulator's swap-in pre-trigger and swap-out completion layers (Eq. 3), release
points, and placement by the online allocator (``allocator.bestfit`` unless the request names
``va``). The parts live in ``planner.smartswap``; their public names are re-exported here.

``request.policy_options``: ``c`` (Eq. 2's C, default ``C_DEFAULT``), ``layers`` (logical layers
per phase, default ``LAYERS``), ``reserve`` (the share of the bytes the copy queues' release
points hold longer that Algorithm 2 sheds beforehand, default 0), ``order`` ("eager", the
default: each accumulation and update as soon as it is ready, as an eager framework runs the
iteration; "given": the graph's order) and ``placement`` ("oldest", the default, or "bestfit";
``planner.smartswap.plan``).
"""
from __future__ import annotations

from allocator.registry import ONLINE
from engine.collector import collector_held
from engine.program import Program

from ..online_program import policy_sets
from ..policy import PlanRequest, Policy, register
from ..smartswap import (BACKWARD, C_DEFAULT, FORWARD, LAYERS, OPTIMIZER, Layers, ReleaseReport,
                         Simulator, SmartSwapPlan, logical_layers, phases, release_report, score, swap_seconds)
from ..smartswap.build import NAME
from ..smartswap.plan import NoRoom

__all__ = ["BACKWARD", "C_DEFAULT", "FORWARD", "LAYERS", "OPTIMIZER", "POLICY", "Layers", "ReleaseReport",
           "Simulator", "SmartSwapPlan", "logical_layers", "make", "phases", "release_report", "score", "swap_seconds"]


def make(request: PlanRequest) -> Program:
    """The plan with the request's options; if it finds no room anywhere, the same with PyTorch's
    placement, then in the graph's order, then both (near the smallest budget one may fit where
    another does not: gpt-tiny at 0.3 of its peak on a measured cpu profile fits only so). Where
    the placement does not reach the allocator (va places by its own rule; a request's own
    oldest_within wins) one placement is tried: the other would repeat it exactly, and a refusal
    took twice as long."""
    opts = request.policy_options
    c, layers, reserve = float(opts.get("c", C_DEFAULT)), int(opts.get("layers", LAYERS)), float(opts.get("reserve", 0.0))
    order, placement = str(opts.get("order", "eager")), str(opts.get("placement", "oldest"))
    placements = (placement, "bestfit") if policy_sets(request, "oldest_within") else (placement,)
    tries = dict.fromkeys((o, p) for o in (order, "given") for p in placements)
    first = None
    for order, placement in tries:
        try:
            with collector_held():
                return SmartSwapPlan(request, c, layers, reserve, order, placement).make()
        except NoRoom as e:
            first = first or e
    raise first


POLICY = register(Policy(NAME, "SmartSwap: logical layers, Eq. 2 candidates, simulated swap timing "
                         "and release points (no search), online allocator", make, kinds=(ONLINE,)))
