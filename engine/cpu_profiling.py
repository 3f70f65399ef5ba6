"""Measuring a profile on the CPU backend: each operator's time and the per-instruction cost
(engine/profiling.py measures), and how long a stream thread takes to resume after another
stream sets the event it waits on (``Profile.wake_s``). For the emulated link, the link's times
include the pacing's sleep overshoot."""
from __future__ import annotations

import statistics
import threading
import time

import numpy as np

from .backends.cpu import CpuBackend, EmulatedLink, Event, Stream
from .data import TeacherData
from .ir import Graph
from .profile import Profile
from .profiling import measure_profile
from .program import Program


def measure_cpu_profile(g: Graph, ideal: Program, link: EmulatedLink = EmulatedLink(), seed: int = 0,
                        iterations: int = 3, data: TeacherData | None = None) -> Profile:
    """A Profile of ``g`` on this machine's CPU backend, from ``ideal`` (the unlimited program):
    each signature gets the median of its samples over ``iterations`` after a warm-up."""
    # The emulated link's copies are paced by sleeps, which overshoot by the kernel's timer slack
    # (50 us) on every copy, however quiet the machine: its median is what a run sees, not its
    # fastest (a 4 KiB copy's median 1.6x the line fitted to minima, a 64 KiB copy's 1.14x).
    m = measure_profile(CpuBackend(link), g, ideal, seed, iterations, data, link_pick=statistics.median)
    # The compute stream's gap between one kernel's end and the next one's start: the
    # host work per instruction (the ideal program rarely waits on another stream).
    gaps = [b[1] - a[2] for a, b in zip(m.kernels, m.kernels[1:]) if b[1] > a[2]]
    dispatch = float(np.median(gaps)) if gaps else 0.0
    return Profile("cpu", m.link, None, m.ops, dispatch, wake_s=measure_wake_s())


WAKE_TRIALS = 200
WAKE_LEAD_S = 200e-6    # the setter waits this long first, so that the waiter is blocked by then


def measure_wake_s(trials: int = WAKE_TRIALS) -> float:
    """The median delay from one stream thread setting an event to the stream blocked on it
    resuming (the backend's own Stream and Event; on a busy machine the OS takes longer, and the
    run this profile is for is as busy). Residual-cnn's compute stream blocks about 100 times an
    iteration on copies; uncharged, these wake-ups made the simulator 16-20% fast (issue 38)."""
    waiter, setter = Stream("wake-waiter"), Stream("wake-setter")
    delays = []
    try:
        for _ in range(trials):
            ev, resumed = Event(), threading.Event()
            stamps = {}
            waiter.wait(ev)
            waiter.submit(lambda: (stamps.__setitem__("woke", time.perf_counter()), resumed.set()))

            def fire():
                until = time.perf_counter() + WAKE_LEAD_S
                while time.perf_counter() < until:      # spin: a sleep would add its own wake-up
                    pass
                stamps["set"] = time.perf_counter()
                ev.set()
            setter.submit(fire)
            resumed.wait()
            delays.append(stamps["woke"] - stamps["set"])
    finally:
        waiter.close()
        setter.close()
    return float(np.median(delays))
