"""Online allocators: placed one request at a time, in program order, knowing only byte sizes.

A policy that walks a schedule (the schedule-window swapper of paper 001, the LMS baseline)
asks for memory as tensors come to life and gives it back as they die or leave for the host:

    alloc = make_online_allocator("bestfit", budget.pool_bytes)     # or "va", chunk_bytes=...
    obj = alloc.alloc(tensor_bytes)    # a NEW object id, or None: nothing fits within capacity now
    ...                                # (wait for a reserved swap-out to finish, free, retry)
    alloc.free(obj)                    # its bytes may serve later objects
    arena = Arena.of(alloc.layout(), budget.scratch_bytes)

Every ``alloc`` returns a new object id (ids count 0, 1, 2, ...), so a Program's object is one
tensor's stay on the device. Objects may share bytes with objects freed earlier: the verifier
treats shared bytes as one memory (``engine.program.sharing_objects``), and for allocators whose
objects are backed by several physical pieces (``va``), the layout's ``mappings`` (a page table)
say which physical bytes each object's contiguous (virtual) range maps to.

Statistics (``stats()``), for 001 Figure 3: bytes reserved (segments or physical chunks held)
against bytes requested (live objects' requested sizes), now and at their high-water marks.

The allocators: ``bestfit`` (allocator/bestfit.py: best fit with caching, splitting and
coalescing, as PyTorch's CUDA caching allocator and TensorFlow's BFC) and ``va``
(allocator/virtual_chunks.py: fixed-size physical chunks mapped into contiguous virtual ranges).
"""
from __future__ import annotations

import inspect
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol

import numpy as np

from engine.errors import EngineError

from allocator import registry
from allocator.registry import ONLINE, UnknownAllocator, takes_option  # noqa: F401  (re-exported)


class AllocatorMisuse(EngineError, ValueError):
    """A caller broke the protocol (freed an object twice, asked for a negative size...)."""


@dataclass(frozen=True)
class AllocatorStats:
    reserved_bytes: int           # held from the device now: segments (bestfit), physical chunks (va)
    requested_bytes: int          # the live objects' requested sizes now
    peak_reserved_bytes: int      # high-water marks since the allocator was made
    peak_requested_bytes: int

    @property
    def peak_ratio(self) -> float:
        """Reserved over requested at their high-water marks (001 Figure 3's measure)."""
        return self.peak_reserved_bytes / self.peak_requested_bytes if self.peak_requested_bytes else 1.0


@dataclass(frozen=True, eq=False)
class OnlineLayout:
    """What ``engine.program.Arena.of(layout, scratch_bytes)`` reads: per object (by id) its
    offset and size in the arena's address space, the arena's bytes, and a JSON description.

    ``mappings`` (None for allocators whose objects are plain byte ranges of the arena): the
    page table of an allocator whose objects are backed by several physical pieces (``va``),
    rows (virtual offset, physical offset, bytes). Object ranges are then VIRTUAL ranges within
    ``virtual_bytes``; an object's physical extents are its range translated through the rows
    (``engine.program.Arena.physical_extents``); ``arena_bytes`` counts physical memory only
    (what a budget bounds)."""
    object_offset: np.ndarray
    object_bytes: np.ndarray
    arena_bytes: int
    description: dict
    mappings: np.ndarray | None = None
    virtual_bytes: int = 0

    def describe(self) -> dict:
        return dict(self.description)


class OnlineAllocator(Protocol):
    name: str
    capacity_bytes: int

    def alloc(self, nbytes: int) -> int | None:
        """A new object id holding ``nbytes``, or None: it cannot be placed within capacity now."""

    def free(self, obj: int) -> None:
        """Object ``obj``'s tensor is dead or swapped out: its bytes may serve later objects."""

    def layout(self) -> OnlineLayout:
        """Every object placed so far (live or freed), for the Program's Arena."""

    def stats(self) -> AllocatorStats:
        """Reserved and requested bytes now and at their high-water marks."""


def register_online(name: str, factory: Callable[..., OnlineAllocator], summary: str) -> None:
    """Register online allocator ``name`` (``factory(capacity_bytes, **params)``) in the allocator
    registry (allocator/registry.py): ``--allocator`` lists it and every policy that accepts
    online allocators can use it."""
    registry.register(registry.Allocator(name, (ONLINE,), summary, factory=factory))


def online_names() -> list[str]:
    return registry.of_kind(ONLINE)


def make_online_allocator(name: str, capacity_bytes: int, **params) -> OnlineAllocator:
    """A fresh allocator ``name`` over ``capacity_bytes`` (the pool: the budget less scratch).
    Parameters it does not take are refused with one line."""
    record = registry.REGISTRY.get(name)
    if record is None or record.factory is None:
        raise UnknownAllocator(f"unknown online allocator '{name}' (choose from "
                               f"{', '.join(online_names()) or 'none registered'})")
    factory = record.factory
    if _recording:
        params = {**params, "keep_history": True}
    try:        # the parameters checked against its signature, so a TypeError inside stays a bug
        inspect.signature(factory).bind(int(capacity_bytes), **params)
    except TypeError as e:
        raise UnknownAllocator(f"allocator '{name}' does not take those parameters ({e})") from None
    made = factory(int(capacity_bytes), **params)
    if _recording:
        made = RecordedAllocator(made)
        for record in _recording:
            record.append(made)
    return made


class RecordedAllocator:
    """An allocator whose calls are logged in ``calls``: ("alloc", nbytes, object or None) and
    ("free", object); everything else is the allocator's own."""

    def __init__(self, inner):
        self.inner = inner
        self.calls: list[tuple] = []

    def alloc(self, nbytes: int) -> int | None:
        obj = self.inner.alloc(nbytes)
        self.calls.append(("alloc", int(nbytes), obj))
        return obj

    def free(self, obj: int) -> None:
        self.inner.free(obj)
        self.calls.append(("free", obj))

    def __getattr__(self, name):
        return getattr(self.inner, name)


def replay(calls, allocator) -> dict[int, int]:
    """Make ``allocator`` serve a recorded call sequence (``RecordedAllocator.calls``), the same
    requests in the same order; {recorded object: its object}. AllocatorMisuse if it cannot
    place a request the recorded allocator placed."""
    ids: dict[int, int] = {}
    for call in calls:
        if call[0] == "free":
            allocator.free(ids.pop(call[1]))
        elif call[2] is not None:
            obj = allocator.alloc(call[1])
            if obj is None:
                raise AllocatorMisuse(f"{allocator.name} cannot place {call[1]} bytes within "
                                      f"{allocator.capacity_bytes} where the recorded allocator did")
            ids[call[2]] = obj
    return ids


_recording: list[list] = []


@contextmanager
def recorded() -> Iterator[list]:
    """Every online allocator made inside the block, in order (``RecordedAllocator``s whose
    calls are logged), each keeping its history of (reserved, requested) after every call: how a
    benchmark watches the allocators a policy makes without the policy knowing
    (bench/fragmentation.py)."""
    made: list = []
    _recording.append(made)
    try:
        yield made
    finally:
        _recording.remove(made)


@dataclass
class StatsCounter:
    """The running reserved/requested counts an allocator keeps (shared by the allocators)."""
    reserved: int = 0
    requested: int = 0
    peak_reserved: int = 0
    peak_requested: int = 0
    history: list = field(default_factory=list)   # (reserved, requested) after every call, if kept
    keep_history: bool = False

    def change(self, reserved: int = 0, requested: int = 0) -> None:
        self.reserved += reserved
        self.requested += requested
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        self.peak_requested = max(self.peak_requested, self.requested)
        if self.keep_history:
            self.history.append((self.reserved, self.requested))

    def snapshot(self) -> AllocatorStats:
        return AllocatorStats(self.reserved, self.requested, self.peak_reserved, self.peak_requested)
