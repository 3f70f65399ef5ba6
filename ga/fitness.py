"""Fitness: plan + simulate, in seconds per iteration.

``Evaluator(facts, profile, budget, policy)``: ``time(schedule, allocation, options)`` runs the
policy's planner on that schedule and allocation (and knob values) and the simulator and returns the simulated iteration time; ``inf`` for an allocation over
the budget's ``pool_bytes`` or one the planner cannot run (``PlanError``). Evaluations run in worker
processes (``ga.workers``).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from allocator import Allocation
from engine.profile import Profile
from planner.budget import Budget
from planner.errors import PlanError
from planner.simulate import simulate
from planner.facts import GraphFacts
from planner.policy import PlanRequest, Policy, searched


class Evaluator:
    """Per-graph inputs of plan + simulate, computed once."""

    def __init__(self, facts: GraphFacts, profile: Profile, budget: Budget, policy: Policy | None = None,
                 node_seconds: np.ndarray | None = None, allocator: str | None = None, allocator_options=(),
                 policy_options=()):
        """``allocator``: how the policy places tensors (PlanRequest.allocator; None: its default)."""
        self.facts, self.graph, self.profile, self.budget = facts, facts.graph, profile, budget
        self.policy = policy or searched()
        self.node_seconds = profile.node_seconds(self.graph) if node_seconds is None else node_seconds
        self.allocator = self.policy.placed_by(allocator)
        self.allocator_options = dict(allocator_options)
        self.policy_options = dict(policy_options)     # held fixed (the caller's), over the knobs

    def request(self, schedule: Sequence[int], allocation: Allocation, options: tuple = ()) -> PlanRequest:
        """``options``: the individual's knob values, (name, value) pairs (the policy's defaults
        for the rest; an option the caller fixed wins over a knob's value)."""
        return PlanRequest(self.graph, self.facts, self.budget, self.profile, self.node_seconds,
                           np.asarray(schedule, dtype=np.int64).tolist(), allocation, self.allocator,
                           self.allocator_options, policy_options={**dict(options), **self.policy_options})

    def program(self, schedule: Sequence[int], allocation: Allocation, options: tuple = ()):
        """The planned Program (PlanError if the allocation cannot run the graph)."""
        return self.policy.make(self.request(schedule, allocation, options))

    def time(self, schedule: Sequence[int], allocation: Allocation, options: tuple = ()) -> float:
        """Simulated seconds per iteration; inf if over budget or not plannable."""
        if allocation.pool_bytes > self.budget.pool_bytes:
            return math.inf
        try:
            if self.policy.seconds is not None:
                return self.policy.seconds(self.request(schedule, allocation, options))
            program = self.program(schedule, allocation, options)
        except PlanError:
            return math.inf
        return float(simulate(program, self.graph, self.profile, self.node_seconds).total)
