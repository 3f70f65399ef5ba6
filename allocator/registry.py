"""The allocator registry: every name ``--allocator`` takes, what it stands for, and what a
policy needs to know to use it. Nothing else compares an allocator's name.

An ``Allocator`` record names one or more KINDS of placement (the mechanisms):

- ``SIZE_CLASSES``: SwapAdvisor's (CLS, CNT) pool, objects grouped by size class
  (``allocator.Allocation``, ``SizeClassLayout``);
- ``CHUNKED``: a size-class allocation whose last class is chunks a tensor of at least a chunk
  takes as many of as it needs (``Allocation.chunk_bytes``, ``PlacedLayout``);
- ``ONLINE``: placed request by request in program order (``allocator.online``; the record
  carries the ``factory``).

A policy declares the kinds it accepts (``planner.policy.Policy.kinds``); ``kinds_for`` says
which of a record's kinds it gets. So one name may serve two kinds of policy: ``va`` is paper
001's virtual chunks (``ONLINE``, window/lms/smartswap) and, to a size-class policy
(swapadvisor), the chunk class of a ``CHUNKED`` allocation. A record that ``plans_each`` of its
kinds (``auto``) is accepted only by a policy that takes them all: it plans on each and keeps
the faster. A policy's default is the first registered allocator it accepts.

The budget's least (``planner.budget.smallest_budget``) comes from ``smallest``: the size-class
pool's minimal allocation (``CLASS_MINIMUM``: exact, a plan exists there) or the heaviest
operator's tensors (``HEAVIEST_OPERATOR``: a bound; rounding and fragmentation may need more).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable, Iterable

from engine.errors import EngineError

SIZE_CLASSES = "size classes"
CHUNKED = "chunked"
ONLINE = "online"
KINDS = (SIZE_CLASSES, CHUNKED, ONLINE)

CLASS_MINIMUM = "size-class minimum"
HEAVIEST_OPERATOR = "heaviest operator"


class UnknownAllocator(EngineError, ValueError):
    """An allocator name nobody registered, or options it does not take; one line."""


@dataclass(frozen=True)
class Allocator:
    name: str
    kinds: tuple[str, ...]           # the placements this name stands for (see the module's doc)
    summary: str                     # one line, for --help
    smallest: str = HEAVIEST_OPERATOR   # where a budget's least comes from: CLASS_MINIMUM or HEAVIEST_OPERATOR
    factory: Callable | None = None  # ONLINE: factory(capacity_bytes, **options) -> allocator.online.OnlineAllocator
    plans_each: bool = False         # the policy plans on each of ``kinds`` and keeps the faster (auto)
    options_from: str | None = None  # the allocator whose options (e.g. chunk_bytes) this one takes

    def __post_init__(self):
        unknown = set(self.kinds) - set(KINDS)
        if not self.kinds or unknown:
            raise ValueError(f"allocator '{self.name}': kinds must be among {KINDS}, not {self.kinds}")
        if (ONLINE in self.kinds) != (self.factory is not None):
            raise ValueError(f"allocator '{self.name}': an online allocator, and only one, has a factory")
        if self.smallest not in (CLASS_MINIMUM, HEAVIEST_OPERATOR):
            raise ValueError(f"allocator '{self.name}': smallest must be {CLASS_MINIMUM!r} or {HEAVIEST_OPERATOR!r}")


REGISTRY: dict[str, Allocator] = {}


def register(record: Allocator) -> Allocator:
    """Add ``record`` under its name; re-registering a name replaces it."""
    REGISTRY[record.name] = record
    return record


def unregister(name: str) -> None:
    REGISTRY.pop(name, None)


def names() -> list[str]:
    return list(REGISTRY)


def get(name: str) -> Allocator:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownAllocator(f"unknown allocator '{name}' (choose from {', '.join(REGISTRY)})") from None


def of_kind(kind: str) -> list[str]:
    """The names that offer ``kind``, in registration order."""
    return [r.name for r in REGISTRY.values() if kind in r.kinds]


def kinds_for(name: str, accepted: Iterable[str]) -> tuple[str, ...]:
    """The kinds of allocator ``name`` a policy accepting ``accepted`` places tensors with:
    all of a ``plans_each`` record's (or none if it lacks one), else the first it accepts;
    () when it can use none."""
    record, accepted = get(name), tuple(accepted)
    taken = tuple(k for k in record.kinds if k in accepted)
    if record.plans_each:
        return taken if taken == record.kinds else ()
    return taken[:1]


def accepted_by(accepted: Iterable[str]) -> list[str]:
    """The names a policy accepting ``accepted`` kinds can use; the first is its default."""
    accepted = tuple(accepted)
    return [n for n in REGISTRY if kinds_for(n, accepted)]


def smallest_is_exact(names_: Iterable[str]) -> bool:
    """Whether the least budget of these allocators is known exactly (a size-class minimum)
    rather than only bounded (an online allocator's heaviest operator)."""
    return any(get(n).smallest == CLASS_MINIMUM for n in names_)


def _options_factory(name: str | None) -> Callable | None:
    record = REGISTRY.get(name or "")
    if record is not None and record.options_from:
        record = REGISTRY.get(record.options_from)
    return None if record is None else record.factory


def takes_option(name: str | None, option: str) -> bool:
    """Whether allocator ``name`` is made with keyword ``option`` (e.g. va's chunk_bytes)."""
    factory = _options_factory(name)
    return factory is not None and option in inspect.signature(factory).parameters


def check_options(name: str, **options) -> None:
    """Refuse, in one line, options allocator ``name`` does not take or values it refuses (by
    making its factory's allocator over no bytes)."""
    factory = _options_factory(name)
    if factory is None:
        if options:
            raise UnknownAllocator(f"allocator '{name}' takes no options ({', '.join(options)} given)")
        return
    try:
        inspect.signature(factory).bind(0, **options)
    except TypeError as e:
        raise UnknownAllocator(f"allocator '{name}' does not take those parameters ({e})") from None
    factory(0, **options)


# The size-class allocators (allocator/size_classes.py, fitting.py, size_class_layout.py); the
# online ones register from their modules (allocator/__init__.py imports them).
register(Allocator("auto", (SIZE_CLASSES, CHUNKED),
                   "the size-class pool and va's chunks both planned, the faster on the simulator kept",
                   smallest=CLASS_MINIMUM, plans_each=True, options_from="va"))
register(Allocator("pool", (SIZE_CLASSES,), "the size-class pool (SwapAdvisor's CLS and CNT)",
                   smallest=CLASS_MINIMUM))
