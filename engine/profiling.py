"""Measuring a profile on the CPU backend: each operator's time and the per-instruction cost.

Operator times are the median of several runs of the numpy kernel on real
values of the right shapes (from one reference iteration). The link is the
emulated one, so its figures are the emulation's settings. The dispatch cost
is what the executor's threads add per instruction (queueing, events), timed
on the backend's own streams.
"""
from __future__ import annotations

import time
from collections import defaultdict

import numpy as np

from ops import registry as op_registry

from . import reference
from .backends.cpu import CpuBackend, EmulatedLink
from .data import TeacherData
from .initializers import initial_state
from .ir import Graph
from .profile import Link, Profile, signature


def measure_dispatch_s(instructions: int = 2000) -> float:
    """Seconds per instruction the CPU backend's streams add: a submit plus a cross-stream event."""
    backend = CpuBackend()
    try:
        t0 = time.perf_counter()
        for i in range(instructions):
            backend.streams[i % 2].submit(lambda: None)
            ev = backend.record(i % 2)
            backend.wait(1 - i % 2, ev)
        backend.synchronize()
        return (time.perf_counter() - t0) / instructions
    finally:
        backend.close()


def measure_cpu_profile(g: Graph, link: EmulatedLink = EmulatedLink(), seed: int = 0,
                        repeats: int = 3) -> Profile:
    """A Profile of ``g`` on this machine's CPU backend."""
    feeds = {**initial_state(g, seed), **TeacherData(g, seed).batch(0)}
    values = reference.execute(g, g.default_order(), feeds)
    samples: dict[str, list[float]] = defaultdict(list)
    for n in g.nodes:
        decl = op_registry.get(n.op)
        ins = [values[t] for t in n.inputs]
        outs = [np.empty_like(values[t]) for t in n.outputs]
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            decl.compute(n.attrs, ins, outs)
            times.append(time.perf_counter() - t0)
        samples[signature(g, n.id)].append(float(np.median(times)))
    ops = {sig: float(np.median(ts)) for sig, ts in samples.items()}
    return Profile("cpu", Link(link.h2d_bytes_per_s, link.d2h_bytes_per_s, link.duplex_bytes_per_s,
                               link.latency_s), None, ops, measure_dispatch_s())
