"""Serving several models on one device: a discrete-event simulation (SwapAdvisor Figure 8).

Clients arrive as a Poisson process; each arrival is a batch of ``batch`` requests for one
of the models, chosen uniformly at random. The device runs one batch at a time, first come
first served. What a batch costs depends on how the models share the device's memory:

- ``not_shared``: one model, its weights resident: every batch takes ``full_s``.
- ``partitioned``: each model owns 1/N of the memory and runs its own swapping plan, whose
  resident weights stay put between its batches: a batch takes ``partitioned_s`` (the plan's
  simulated time) on the device. With ``prefetch``, the weights it streams (``stream_s`` on
  the link) start coming in as soon as the batch has arrived, the link is free and its
  model's previous batch is done, while other models compute; the batch then ends at the
  later of its start plus ``full_s`` (compute alone) and its stream's start plus
  ``partitioned_s``. Without, it starts when the device is free (what engine/library/server.Server
  does: one Program after another).
- ``time_shared``: models' weights are loaded whole into the shared memory, which holds
  ``resident_models`` of them; a batch for a model not resident first loads its weights
  (``load_s``, nothing else runs meanwhile), evicting the least recently used model.

A request's latency is its batch's completion minus its arrival. The times come from plans
(engine/library/server.py turns Programs into a ``Costs``); this module knows only seconds.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .errors import EngineError

STRATEGIES = ("not_shared", "partitioned", "time_shared")


class ServingError(EngineError, ValueError):
    """A serving configuration that cannot be simulated; the message says what would work."""


@dataclass(frozen=True)
class Costs:
    """Seconds per batch of one model: alone with full memory, under its partition's plan,
    loading its weights whole; how many models' weights the shared memory holds at once."""
    full_s: float
    partitioned_s: float
    load_s: float
    resident_models: int
    stream_s: float = 0.0       # the partition plan's swap-ins on the link


@dataclass(frozen=True)
class Arrivals:
    """Batch arrival times (seconds, ascending) and the model each batch is for."""
    times: np.ndarray
    models: np.ndarray


def poisson_arrivals(rate_rps: float, batch: int, models: int, batches: int, seed: int = 0) -> Arrivals:
    """``batches`` arrivals of ``batch`` requests each at ``rate_rps`` requests per second in
    all, each for a model drawn uniformly from ``models``."""
    if not rate_rps > 0 or batch < 1 or models < 1 or batches < 1:
        raise ServingError(f"a rate above 0 and at least one batch, request and model are needed "
                           f"(got rate {rate_rps}, batch {batch}, {models} models, {batches} batches)")
    rng = np.random.default_rng([seed, 0xF18])
    gaps = rng.exponential(batch / rate_rps, size=batches)
    return Arrivals(np.cumsum(gaps), rng.integers(0, models, size=batches))


def service_times(strategy: str, costs: Costs, models: Sequence[int]) -> np.ndarray:
    """Seconds the device spends on each batch, in arrival order (first come, first served)."""
    if strategy == "not_shared" or strategy == "partitioned":
        return np.full(len(models), costs.full_s if strategy == "not_shared" else costs.partitioned_s)
    if strategy != "time_shared":
        raise ServingError(f"unknown strategy '{strategy}' (choose from {', '.join(STRATEGIES)})")
    if costs.resident_models < 1:
        raise ServingError("time sharing needs room for at least one model's weights and its batch")
    resident: OrderedDict[int, None] = OrderedDict()
    out = np.empty(len(models))
    for i, m in enumerate(models):
        m = int(m)
        if m in resident:
            resident.move_to_end(m)
            out[i] = costs.full_s
        else:
            if len(resident) >= costs.resident_models:
                resident.popitem(last=False)
            resident[m] = None
            out[i] = costs.load_s + costs.full_s
    return out


def fifo_completions(arrivals: np.ndarray, service: np.ndarray) -> np.ndarray:
    """Completion times of one server taking jobs first come, first served."""
    done = np.empty(len(arrivals))
    free = 0.0
    for i, (a, s) in enumerate(zip(arrivals, service)):
        free = max(free, float(a)) + float(s)
        done[i] = free
    return done


@dataclass(frozen=True)
class Latencies:
    """Per-batch latencies (every request of a batch shares its batch's) and the load."""
    seconds: np.ndarray
    busy_fraction: float        # of the time from the first arrival to the last completion
    throughput_rps: float       # requests completed per second over that time

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.seconds, q))


def prefetching_completions(arrivals: Arrivals, costs: Costs) -> tuple[np.ndarray, float]:
    """Completion times of partitioned models whose streamed weights come in ahead (see the
    module docstring), first come, first served; and the device's busy seconds."""
    done = np.empty(len(arrivals.times))
    link_free = device_free = busy = 0.0
    model_free: dict[int, float] = {}
    for i, (a, m) in enumerate(zip(arrivals.times, arrivals.models)):
        stream = max(a, link_free, model_free.get(int(m), 0.0))
        link_free = stream + costs.stream_s
        start = max(a, device_free)
        end = max(start + costs.full_s, stream + costs.partitioned_s)
        busy += end - start
        device_free = model_free[int(m)] = done[i] = end
    return done, busy


def simulate_serving(strategy: str, costs: Costs, arrivals: Arrivals, batch: int,
                     warmup: int = 0, prefetch: bool = False) -> Latencies:
    """Latencies of ``arrivals`` served under ``strategy``; the first ``warmup`` batches are
    served but not counted (the queue starts empty). ``prefetch``: partitioned models stream
    their weights in while others compute."""
    if strategy == "partitioned" and prefetch:
        done, busy_s = prefetching_completions(arrivals, costs)
    else:
        service = service_times(strategy, costs, arrivals.models)
        done, busy_s = fifo_completions(arrivals.times, service), float(service.sum())
    span = float(done[-1] - arrivals.times[0]) if len(done) else 0.0
    lat = (done - arrivals.times)[warmup:]
    return Latencies(lat, busy_s / span if span > 0 else 0.0, batch * len(done) / span if span > 0 else 0.0)
