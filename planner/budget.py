"""The memory budget, made once: device bytes, the operator scratch they must hold, and what
is left for the tensor pool.

``--memory`` bounds the whole arena: the objects tensors live in plus one region of
operator scratch at its end. ``make_budget`` is the one place that splits it and the one
place that refuses a budget too small to run the graph, naming the operator that does not
fit and the smallest budget that runs. How small that is depends on how tensors are placed
(``smallest_budget``, from the allocator registry's ``smallest``): the size-class pool needs its
minimal allocation, an online allocator only room for the heaviest operator. A policy on an online allocator may still
find no room there (fragmentation, tensors it keeps resident): ``smallest_that_plans`` finds
the least budget at which it plans.
"""
from __future__ import annotations

from dataclasses import dataclass

from allocator import registry as allocators_registry
from allocator.registry import CLASS_MINIMUM, HEAVIEST_OPERATOR
from engine.units import format_bytes

from .facts import GraphFacts
from .errors import OutOfRoom, PlanError


@dataclass(frozen=True)
class Budget:
    device_bytes: int      # the whole arena: pool objects plus operator scratch
    scratch_bytes: int     # reserved at the arena's end for operator scratch

    @property
    def pool_bytes(self) -> int:
        """What the allocation's objects may use."""
        return self.device_bytes - self.scratch_bytes


def smallest_budget(facts: GraphFacts, allocators=None) -> int:
    """The least device bytes with which some of ``allocators`` (registered names; None or
    none: as the size-class pool) could run every operator, by each one's ``smallest``. The
    size-class minimum (``GraphFacts.smallest_budget``: every class as many objects as one
    operator uses of it, each the class's largest size). The heaviest operator: an online
    allocator puts any tensor in any free bytes, so it needs that operator's inputs and outputs
    at once; its own rounding (best fit's blocks, va's chunks) may need more, which its policy
    reports when it places them."""
    rules = {allocators_registry.get(n).smallest for n in allocators or ()} or {CLASS_MINIMUM}
    pool_need = facts.smallest_budget if CLASS_MINIMUM in rules else None
    online_need = facts.demand.heaviest_bytes + facts.scratch.bytes if HEAVIEST_OPERATOR in rules else None
    return min(n for n in (pool_need, online_need) if n is not None)


def make_budget(facts: GraphFacts, device_bytes: int, allocators=None) -> Budget:
    """The budget of ``device_bytes`` for ``facts.graph``, placed by one of ``allocators``
    (registered names, as ``smallest_budget``); PlanError naming the heaviest operator when it
    is below the smallest budget that runs."""
    need = smallest_budget(facts, allocators)
    scratch = facts.scratch.bytes
    if device_bytes < need:
        d, g = facts.demand, facts.graph
        node = g.nodes[d.heaviest_node]
        extra = f", plus {format_bytes(scratch)} of operator scratch" if scratch else ""
        raise PlanError(f"a budget of {format_bytes(device_bytes)} cannot run {node.name} ({node.op}; its "
                        f"inputs and outputs alone need {format_bytes(d.heaviest_bytes)}{extra}); the "
                        f"smallest budget that runs this model is {format_bytes(need)}")
    return Budget(int(device_bytes), scratch)


# smallest_that_plans: budgets tried up to this many times the unlimited peak, and found to
# within this share of the peak (a handful of plans: doubling, then bisection).
MAX_GROWTH = 2.0
TOLERANCE = 0.02


def smallest_that_plans(facts: GraphFacts, device_bytes: int, allocators, make, on_try=None):
    """The least budget from ``device_bytes`` up (to within TOLERANCE of the unlimited peak)
    at which ``make(budget)`` returns rather than raising OutOfRoom, and what it returned
    there: (Budget, result). Doubles until it plans, then bisects; OutOfRoom from the last try
    when even MAX_GROWTH times the peak does not plan. ``on_try(device_bytes, error)`` hears
    each budget that did not plan. Assumes only that the budget found plans: a policy need not
    plan at every budget above it."""
    peak = facts.peak_bytes
    cap = max(int(MAX_GROWTH * peak), device_bytes)

    def attempt(n: int):
        budget = make_budget(facts, n, allocators)
        try:
            return budget, make(budget)
        except OutOfRoom as e:
            if on_try is not None:
                on_try(n, e)
            if n >= cap:
                raise
            return None

    lo, hi = device_bytes, device_bytes
    found = attempt(hi)
    while found is None:
        lo, hi = hi, min(2 * hi, cap)
        found = attempt(hi)
    if hi == device_bytes:
        return found
    while hi - lo > max(TOLERANCE * peak, 1):
        mid = (lo + hi) // 2
        tried = attempt(mid)
        lo, hi, found = (lo, mid, tried) if tried is not None else (mid, hi, found)
    return found
