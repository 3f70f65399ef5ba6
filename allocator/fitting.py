"""Making allocations fit a byte budget, and making allocations that do (Sec 5.3).

- ``repair_cnt``: the paper's CNT repair, shrinking counts inversely to object size.
- ``merge_classes_to_fit``: when even one object per class exceeds the budget (no count
  repair can help), merge the fewest classes so that it does not. The paper does not say
  what to do then; this keeps every allocation the search makes runnable.
- ``fit_to_budget``: both, in that order: the one repair a search needs after crossover
  or mutation.
- ``random_allocation``: a random allocation that fits (the search's first generation).

Every function returns a new Allocation; none mutates its input. Budgets are in bytes and
compared with ``Allocation.pool_bytes`` (objects padded to ALIGNMENT).
"""
from __future__ import annotations

import numpy as np

from allocator.size_classes import ALIGNMENT, Allocation
from engine.units import format_bytes
from engine.errors import EngineError


class AllocationDoesNotFit(EngineError, ValueError):
    """No allocation of the required shape fits the budget; the message gives the least that would."""


def _shrunk_counts(cnt: np.ndarray, slot: np.ndarray, give_up: int) -> np.ndarray:
    """Counts after each class gives up `give_up` bytes, in whole objects, keeping at least 1."""
    return np.maximum(cnt - give_up // slot, 1)


def repair_cnt(alloc: Allocation, budget_bytes: int) -> Allocation:
    """The paper's CNT repair: decrease counts inversely proportionally to object size.

    Input: an allocation and a budget. Output: the same CLS with counts lowered just enough
    that ``pool_bytes <= budget_bytes``; an allocation that already fits is returned as is.
    Rule: every class gives up the same number of bytes t, in whole objects (class k loses
    floor(t / slot_k) objects, so count decreases are inversely proportional to object size),
    never going below 1 object; t is the smallest that fits, found by bisection.
    Figure 5: counts [8, 3] of 1 MiB and 4 MiB objects under 12 MiB -> t = 4 MiB -> [4, 2].
    Raises AllocationDoesNotFit when even one object per class exceeds the budget.
    """
    if alloc.pool_bytes <= budget_bytes:
        return alloc
    if alloc.min_pool_bytes > budget_bytes:
        raise AllocationDoesNotFit(
            f"{alloc.num_classes} size classes need {format_bytes(alloc.min_pool_bytes)} "
            f"({alloc.min_pool_bytes} bytes) for one object each, more than the budget of "
            f"{format_bytes(budget_bytes)}; merge classes (merge_classes_to_fit) or raise the budget")
    cnt, slot = alloc.cnt, alloc.class_slot_bytes
    excess = alloc.pool_bytes - budget_bytes
    # Giving up t bytes per class frees at most K*t, so any t < excess/K is too small.
    too_small = -(-excess // alloc.num_classes) - 1
    enough = int(((cnt - 1) * slot).max())  # every class down to one object: fits (checked above)
    while enough - too_small > 1:
        middle = (too_small + enough) // 2
        if int(_shrunk_counts(cnt, slot, middle) @ slot) <= budget_bytes:
            enough = middle
        else:
            too_small = middle
    return alloc.with_counts(_shrunk_counts(cnt, slot, enough))


def merge_classes_to_fit(alloc: Allocation, budget_bytes: int) -> Allocation:
    """Merge the fewest size classes so that one object per class fits `budget_bytes`.

    Object sizes grow with the class index, so the fewest merges fold the classes just
    below the top one into it: classes j..K-1 become one class (object = the largest size),
    with count the sum of theirs (as many objects as before; repair_cnt may then shrink it).
    Returns the input unchanged when it already fits at one object per class. Raises
    AllocationDoesNotFit when even one object of the largest size exceeds the budget.
    """
    slot = alloc.class_slot_bytes
    if alloc.min_pool_bytes <= budget_bytes:
        return alloc
    largest = int(slot[-1])
    if largest > budget_bytes:
        raise AllocationDoesNotFit(
            f"the largest tensor size, {int(alloc.sizes[-1])} bytes ({largest} bytes aligned to "
            f"{ALIGNMENT}), exceeds the budget of {format_bytes(budget_bytes)}; "
            f"the smallest budget that could hold it is {largest} bytes")
    below = np.concatenate(([0], np.cumsum(slot[:-1])))  # below[j]: one object each of classes < j
    keep = int(np.searchsorted(below, budget_bytes - largest, side="right")) - 1
    cls = np.minimum(alloc.cls, keep)
    cnt = np.append(alloc.cnt[:keep], alloc.cnt[keep:].sum())
    return Allocation(alloc.sizes, cls, cnt)


def fit_to_budget(alloc: Allocation, budget_bytes: int) -> Allocation:
    """Merge classes if one object each does not fit, then repair counts: always fits or raises."""
    return repair_cnt(merge_classes_to_fit(alloc, budget_bytes), budget_bytes)


def _class_caps(cls: np.ndarray, per_size, num_sizes: int) -> np.ndarray:
    """Per-class caps from per-size caps (scalar or one per size): a class may use the sum."""
    per_size = np.broadcast_to(np.asarray(per_size, dtype=np.int64), (num_sizes,))
    return np.maximum(np.bincount(cls, weights=per_size).astype(np.int64), 1)


def random_allocation(sizes, budget_bytes: int, rng: np.random.Generator,
                      max_counts=None) -> Allocation:
    """A random allocation that fits `budget_bytes`.

    Inputs: TS (sorted distinct sizes), the budget, a numpy Generator, and optionally the
    most objects worth having per size (scalar or one per size, e.g. peak demand; a merged
    class may have the sum of its sizes'). CLS takes random 0/1 steps (merged if one object
    per class does not fit); the budget is split among classes at random and each class gets
    as many objects as its share buys (at least 1, at most its cap); repair_cnt then fixes
    any overshoot from the minimum of 1. Raises AllocationDoesNotFit if the largest size
    alone exceeds the budget.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    steps = rng.integers(0, 2, size=max(sizes.size - 1, 0))
    cls = np.concatenate(([0], np.cumsum(steps)))
    shape = merge_classes_to_fit(Allocation(sizes, cls, np.ones(cls[-1] + 1, np.int64)), budget_bytes)
    share = rng.random(shape.num_classes)
    share /= share.sum()
    cnt = np.maximum(np.floor(share * budget_bytes / shape.class_slot_bytes).astype(np.int64), 1)
    if max_counts is not None:
        cnt = np.minimum(cnt, _class_caps(shape.cls, max_counts, sizes.size))
    return repair_cnt(shape.with_counts(cnt), budget_bytes)


__all__ = ["AllocationDoesNotFit", "repair_cnt", "merge_classes_to_fit", "fit_to_budget",
           "random_allocation"]
