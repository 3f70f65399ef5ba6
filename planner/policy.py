"""The policy seam: how a graph, a budget and a profile become a Program.

A ``Policy`` is a small record: its name, a one-line summary for ``--help``, what it
needs (a budget? does a search choose its schedule and allocation?), and ``make``, which
turns a ``PlanRequest`` into a Program. Each policy is one module in
``planner/policies/`` that calls ``register``; nothing outside ``planner/`` compares a
policy's name with a string: callers look a policy up (``get``) and read its attributes.

Adding one: a module in ``planner/policies/`` (imported by that package's ``__init__``)
or anywhere that calls ``register`` before the command line parses its flags; tests
beside it; see docs/architecture.md for the checklist.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from engine.errors import EngineError
from engine.ir import Graph
from engine.profile import Profile
from engine.program import Program

from allocator import registry as allocators_registry
from allocator.registry import SIZE_CLASSES

from .budget import Budget
from .facts import GraphFacts


class UnknownPolicy(EngineError, ValueError):
    """A policy name nobody registered; the message lists the known ones."""


class AllocatorNotSupported(EngineError, ValueError):
    """A policy asked to place tensors with an allocator it cannot use."""


def allocator_names() -> list[str]:
    """Every allocator a policy may be asked to use (allocator.registry), in registration order."""
    return allocators_registry.names()


def check_allocator(policy: "Policy", allocator: str) -> None:
    """One line if ``policy`` cannot place tensors with ``allocator``."""
    placement_kinds(policy, allocator)


def placement_kinds(policy: "Policy", allocator: str | None) -> tuple[str, ...]:
    """The kinds of placement (allocator.registry: SIZE_CLASSES, CHUNKED, ONLINE) ``policy``
    gets from ``allocator`` (None: its default); AllocatorNotSupported, one line, when none."""
    name = policy.placed_by(allocator)
    if name not in allocators_registry.REGISTRY:
        raise AllocatorNotSupported(f"unknown allocator '{name}' (choose from {', '.join(allocator_names())})")
    kinds = allocators_registry.kinds_for(name, policy.kinds)
    if not kinds:
        raise AllocatorNotSupported(f"policy '{policy.name}' cannot use allocator '{name}' "
                                    f"(it uses {', '.join(policy.allocators)})")
    return kinds


@dataclass(frozen=True)
class PlanRequest:
    """What a policy plans from. ``facts`` are of ``graph`` in its default order;
    ``schedule`` and ``allocation`` come from a search when the policy ``searches``."""
    graph: Graph
    facts: GraphFacts
    budget: Budget | None = None           # None for policies that need none
    profile: Profile | None = None         # None: no op times (the recency threshold then counts steps)
    node_seconds: np.ndarray | None = None  # the profile's op times, precomputed (optional)
    schedule: Sequence[int] | None = None
    allocation: object | None = None       # the search's allocation (allocator.Allocation)
    # How tensors are placed: a registered allocator's name (allocator.registry; the policy
    # reads the kinds it gets with ``placement_kinds``), or None: the policy's own default
    # (``Policy.allocators[0]``).
    allocator: str | None = None
    allocator_options: Mapping[str, object] = field(default_factory=dict)   # e.g. {"chunk_bytes": ...}
    # The policy's own knobs, e.g. {"window": bytes or "auto"} (window) or
    # {"swapout_threshold": n, "swapin_ahead": n} (lms); policies ignore what they do not know.
    policy_options: Mapping[str, object] = field(default_factory=dict)

    @property
    def op_seconds(self) -> np.ndarray | None:
        """The profile's op times (None without a profile), read from the profile once and kept
        in ``node_seconds``: a policy reads them several times a plan and a budget ladder on
        every rung (NasNet-25: 0.7 s each time from the profile). Kept as the field ``replace``
        copies; the frozen dataclass's one deliberate write, of values equal to what it replaces."""
        if self.node_seconds is None and self.profile is not None:
            object.__setattr__(self, "node_seconds", self.profile.node_seconds(self.graph))
        return self.node_seconds

    @property
    def link_bytes_per_s(self) -> float | None:
        return None if self.profile is None else self.profile.link.h2d_bytes_per_s


@dataclass(frozen=True)
class Knob:
    """A planner option the search may vary (``PlanRequest.policy_options[name]``): the grid of
    values it moves on, and the value a plan takes when nobody chose one."""
    values: tuple
    default: object
    # The knob (or option held fixed) whose value 0 leaves this one without effect (max_chain
    # when nothing is recomputed): the search then holds this one at its default, so that genomes
    # that plan alike are one genome.
    inert_unless: str | None = None
    # Other values the search's seeded first individuals are planned with too, the fastest kept
    # (recompute's 0: whether recomputing pays differs by model, as the unsearched plan finds).
    seeds: tuple = ()

    def __post_init__(self):
        if self.default not in self.values:
            raise ValueError(f"a knob's default {self.default!r} is not among its values {self.values!r}")
        if not set(self.seeds) <= set(self.values):
            raise ValueError(f"a knob's seed values {self.seeds!r} are not among its values {self.values!r}")

    def inert_given(self, values: Mapping[str, object]) -> bool:
        """Whether ``values`` (other knobs' or fixed options', by name) leave this knob without effect."""
        return self.inert_unless is not None and values.get(self.inert_unless) == 0


@dataclass(frozen=True)
class Policy:
    name: str
    summary: str                                   # one line, for --help
    make: Callable[[PlanRequest], Program | None]  # None only for policies that run no Program
    needs_budget: bool = True
    searches: bool = False      # ga.search can choose its schedule and allocation
    runs_program: bool = True   # False: runs on the numpy reference interpreter, no plan
    unlimited: bool = False     # the unlimited-memory plan other plans are measured against
    # The simulated seconds of the Program ``make`` would return, without making it (the
    # search's fitness, run for every candidate); None: make, then planner.simulate.
    seconds: Callable[[PlanRequest], float] | None = None
    # The kinds of allocator it places tensors with (allocator.registry); every registered
    # allocator offering one of them is accepted (``allocators``).
    kinds: tuple[str, ...] = (SIZE_CLASSES,)
    # Options of ``make`` that a search may vary beside the schedule and allocation (genes), by name.
    knobs: Mapping[str, Knob] = field(default_factory=dict)
    # The PlanRequest.policy_options it reads (e.g. window's "window"): a flag setting one that no
    # chosen policy reads changes nothing, and the command line refuses it.
    options: tuple[str, ...] = ()
    # Its unsearched plans are made on the budget ladder (planner.budget_ladder.ladder_program), so that
    # more memory never plans slower.
    budget_ladder: bool = False
    # It plans at its allocator's smallest budget (that budget lets every operator run, swapping the
    # rest). False for a policy that keeps on the device what it cannot recompute (checkpoint): a
    # default budget is then grown until it plans (engine/library/planning.grows).
    plans_at_smallest_budget: bool = True

    @property
    def allocators(self) -> list[str]:
        """The registered allocators it can use; the first is its default."""
        return allocators_registry.accepted_by(self.kinds)

    def placed_by(self, allocator: str | None) -> str:
        """The allocator it places tensors with when asked for ``allocator`` (None: its default)."""
        return allocator or self.allocators[0]


# The request option that says how readily a planner recomputes instead of swapping (0: never),
# read by the policies that list it in ``Policy.options``; ``--swap-only`` sets it to 0.
RECOMPUTE_OPTION = "recompute"

REGISTRY: dict[str, Policy] = {}
# Compared by default on the command line, in this order (registered by planner.policies).
DEFAULT_NAMES = ("ideal", "odswap", "swapadvisor")


def register(policy: Policy) -> Policy:
    """Add ``policy`` under its name (lower case); re-registering a name replaces it."""
    REGISTRY[policy.name.lower()] = policy
    return policy


def unregister(name: str) -> None:
    REGISTRY.pop(name.lower(), None)


def get(name: str) -> Policy:
    try:
        return REGISTRY[name.lower()]
    except KeyError:
        raise UnknownPolicy(f"unknown policy '{name}' (choose from {', '.join(REGISTRY)})") from None


def names() -> list[str]:
    return list(REGISTRY)


def searched() -> Policy:
    """The policy a search plans with when none is named: the first that ``searches``."""
    return next(p for p in REGISTRY.values() if p.searches)


def unlimited() -> Policy:
    """The policy every report compares with: unlimited memory."""
    return next(p for p in REGISTRY.values() if p.unlimited)


def unlimited_program(graph: Graph, facts: GraphFacts | None = None) -> Program:
    """The unlimited-memory Program of ``graph`` (for profiling and as the bit-for-bit reference)."""
    return unlimited().make(PlanRequest(graph, facts or GraphFacts(graph)))


def plan_with(name: str, graph: Graph, device_bytes: int | None = None, profile: Profile | None = None,
              schedule: Sequence[int] | None = None, allocation=None, facts: GraphFacts | None = None,
              allocator: str | None = None) -> Program:
    """One call from a policy name to its Program, for scripts and tests: the graph's facts
    in its default order, the budget made from ``device_bytes`` (PlanError if too small;
    ignored by policies that need none), the profile's op times and link, tensors placed by
    ``allocator`` (None: the policy's default)."""
    from .budget import make_budget

    policy = get(name)
    facts = facts or GraphFacts(graph)
    placed = [policy.placed_by(allocator)]
    budget = make_budget(facts, device_bytes, placed) if policy.needs_budget and device_bytes is not None else None
    if policy.needs_budget and budget is None:
        raise ValueError(f"policy '{policy.name}' needs a device budget in bytes")
    return policy.make(PlanRequest(graph, facts, budget, profile, None, schedule, allocation, allocator))
