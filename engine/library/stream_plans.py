"""Planning for a stream of changing graphs (SmartSwap, 004 Sections 3 and 5): a plan cache
keyed by each graph's operator sequence, gated so that no plan ever runs on a graph it was not
made for, and the monitor's stages deciding how much planning each new sequence gets.

- a sequence seen before: its cached, verified plan (in any stage);
- a new sequence: the policy's default plan, made now, verified, cached (the time it took is
  the planning paid for that graph);
- in GenPolicy: the current graphs' plans are regenerated with other options (``ALTERNATIVES``,
  as ``policy_options``: Eq. 2's C, logical layers per phase, the reserve for release points),
  each simulated on the profile, the fastest kept (004 Section 6 generates five and keeps the
  best by runtime); Stable changes nothing.

``admit`` is the gate every plan passes before an executor is made for it: the Program's
graph fingerprint must be the graph's (else ``StalePlanError``), and ``planner.verify``
must accept it under the budget.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from engine.errors import EngineError
from engine.graph_io import fingerprint
from engine.ir import Graph
from engine.iteration_stream import EVAL
from engine.detailed_monitor import DetailedMonitor
from engine.op_monitor import GENPOLICY, Monitor, key_of
from engine.profile import Profile
from engine.program import Program
from planner.budget import make_budget
from planner.errors import PlanError
from planner.facts import GraphFacts
from planner.policy import PlanRequest, get
from planner.simulate import simulate
from planner.verify import verify

from .runners import executor

# Tried in GenPolicy beside the policy's defaults: with the default, five policies, as 004 Section 6
# generates (n = 5) before keeping the fastest. Chosen from ten single and paired changes of
# smartswap's options (C 0 and 0.25, 16 and 64 layers per phase, the given order, bestfit placement,
# reserve 0.5) as four whose best-of on bench.smartswap's GPT-2 XL and 7B streams is highest
# (simulated, against SwapAdvisor re-planned; 2026-11-24): the default alone 0.944 and 0.955, with
# these four 0.971 and 0.966 (the best four found: 0.970 and 0.966).
ALTERNATIVES = ({"layers": 64}, {"layers": 16}, {"order": "given", "layers": 64}, {"c": 0.25})


class StalePlanError(EngineError, ValueError):
    """A plan offered for a graph it was not made for."""


def admit(program: Program, g: Graph, device_bytes: int | None) -> None:
    """The gate: StalePlanError unless ``program`` was planned for ``g`` (its fingerprint), then
    ``planner.verify`` under ``device_bytes``."""
    want = fingerprint(g)
    if program.graph_fingerprint != want:
        raise StalePlanError(f"refused: the plan was made for graph '{program.graph_name}' (fingerprint "
                             f"{program.graph_fingerprint or 'none'}), this iteration runs '{g.name}' ({want}); "
                             "re-plan for this graph")
    verify(program, g, device_bytes)


@dataclass
class Entry:
    graph: Graph
    program: Program
    seconds: float                  # simulated iteration time on the profile
    policy: str
    tuned: bool = False
    made: object = None             # engine.library.runners.Made: its runner and backend


@dataclass
class PlanCache:
    entries: dict[str, Entry] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def lookup(self, key: str) -> Entry | None:
        e = self.entries.get(key)
        if e is None:
            self.misses += 1
        else:
            self.hits += 1
        return e


class StreamPlanner:
    """Runners for the graphs of a stream under one device budget. ``policy``: the policy that
    plans a new graph (``fallback`` when it cannot fit one); ``placement`` None: no executors
    (planning and simulation only, for benchmarks)."""

    def __init__(self, policy: str, device_bytes: int, profile: Profile, placement=None, sanitize: bool = False,
                 seed: int = 0, monitor: Monitor | None = None, fallback: str = "swapadvisor"):
        self.policy, self.fallback = get(policy), get(fallback)
        self.device_bytes, self.profile = device_bytes, profile
        self.placement, self.sanitize, self.seed = placement, sanitize, seed
        self.monitor = monitor or Monitor()
        self.cache = PlanCache()
        self.plan_seconds: list[tuple[str, float]] = []    # (graph, seconds): its first plan, before it ran
        self.tune_seconds: list[tuple[str, float]] = []    # (graph, seconds): GenPolicy's alternatives
        self.fallbacks = 0
        self._ran: dict[int, tuple[Graph, Program]] = {}     # id(graph) -> (graph, the Program its runner runs)

    def _plan(self, g: Graph, policy, **options) -> Entry:
        facts = GraphFacts(g)
        budget = make_budget(facts, self.device_bytes, policy.allocators[:1])
        program = policy.make(PlanRequest(g, facts, budget, self.profile, policy_options=options))
        admit(program, g, budget.device_bytes)
        return Entry(g, program, simulate(program, g, self.profile).total, policy.name)

    def plan(self, g: Graph) -> Entry:
        """The cached entry of ``g``'s sequence, or a new plan for it (timed, verified, cached)."""
        key = key_of(self.monitor.tokenizer.exact([g]))
        e = self.cache.lookup(key)
        if e is None:
            t0 = time.perf_counter()
            try:
                e = self._plan(g, self.policy)
            except PlanError:
                e = self._plan(g, self.fallback)
                self.fallbacks += 1
            self.plan_seconds.append((g.name, time.perf_counter() - t0))
            self.cache.entries[key] = e
        elif e.graph is not g:
            admit(e.program, g, self.device_bytes)      # an equal sequence from another graph object
        if self.monitor.stage == GENPOLICY and not e.tuned and e.policy == self.policy.name:
            self._tune(e)
        return e

    def _tune(self, e: Entry) -> None:
        """GenPolicy: the other options, each planned and simulated; the fastest plan stays."""
        e.tuned = True
        t0 = time.perf_counter()
        for options in ALTERNATIVES:
            try:
                alt = self._plan(e.graph, self.policy, **options)
            except PlanError:
                continue
            if alt.seconds < e.seconds:
                self._close(e)
                e.program, e.seconds, e.made = alt.program, alt.seconds, None
        self.tune_seconds.append((e.graph.name, time.perf_counter() - t0))

    def _close(self, e: Entry) -> None:
        if e.made is not None:
            e.made.__exit__(None, None, None)
            e.made = None

    def runner_for(self, g: Graph):
        e = self.plan(g)
        if e.made is None or e.made.runner.g is not g:
            self._close(e)
            admit(e.program, g, self.device_bytes)
            e.made = executor(e.program, g, self.placement, self.sanitize, self.seed)
        self._ran[id(g)] = (g, e.program)
        return e.made.runner

    def program_ran(self, g: Graph) -> Program:
        """The Program of the runner last handed out for ``g`` (what the detailed monitor reads)."""
        got = self._ran.get(id(g))
        if got is None or got[0] is not g:
            raise KeyError(f"no runner was handed out for graph '{g.name}'")
        return got[1]

    def close(self) -> None:
        for e in self.cache.entries.values():
            self._close(e)



class WindowObserver:
    """Feeds the monitor one optimizer step at a time: the micro-steps of an accumulation window
    and its update make one observed iteration (as an eager framework's step does), an
    evaluation another. Keeps each iteration's time and the monitor's own time beside it.
    ``detailed``: the detailed mode too, at the same point, timed apart (``windows``)."""

    def __init__(self, monitor: Monitor, detailed: DetailedMonitor | None = None):
        self.monitor, self.detailed = monitor, detailed
        self.pending: list[Graph] = []
        self.pending_s = 0.0
        self.times: list[tuple[int, float, float]] = []    # (iteration, its seconds, monitor seconds)
        # per observed iteration: (last trainer iteration, its seconds, simple mode s, detailed mode s)
        self.windows: list[tuple[int, float, float, float]] = []

    def __call__(self, i: int, graphs: list[Graph], seconds: float, step) -> None:
        t0 = time.perf_counter()
        self.pending.extend(graphs)
        self.pending_s += seconds
        detailed_s = 0.0
        if step.kind == EVAL or step.ends_window:
            self.monitor.observe(i, self.pending)
            simple_s = time.perf_counter() - t0
            if self.detailed is not None:
                self.detailed.observe(i, self.pending, self.pending_s)
                detailed_s = time.perf_counter() - t0 - simple_s
            self.windows.append((i, self.pending_s, simple_s, detailed_s))
            self.pending, self.pending_s = [], 0.0
        self.times.append((i, seconds, time.perf_counter() - t0 - detailed_s))
