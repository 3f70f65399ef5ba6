"""Serving N models on one device: the costs that drive the serving simulation
(engine/serving.py), and a server that really runs them (partitioned memory).

    from engine.library.server import Server
    server = Server("resnet-50", models=4, device_bytes=400 * 2**20, batch=2, size=32)
    future = server.submit(model=3)          # a synthetic batch; or submit(3, {input_id: array})
    logits = future.result()                 # {output tensor id: array}
    print(server.percentiles())              # {50: s, 99: s} over the requests served
    server.close()

Each model has its own weights (seed = its index) and its own share of the memory: a Program
planned under ``device_bytes / models`` with the weights as persistent state, on its own
arena; one worker runs the batches first come, first served, as one device would.
"""
from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from planner.facts import GraphFacts

from ..backend_registry import Placement, choose
from ..ir import PERSISTENT_KINDS, Graph
from ..profile import Profile
from ..program import SWAP_IN
from ..serving import Arrivals, Costs, ServingError
from ..units import format_bytes
from .inference import PlannedInference, executor_run, forward_graph, plan_inference
from .models import batch_of
from .planning import profile_of


def weight_bytes(g: Graph) -> int:
    return sum(g.tensors[t].nbytes for t in g.leaves(*PERSISTENT_KINDS))


def load_seconds(g: Graph, profile) -> float:
    """Loading every weight of ``g`` over the profile's link, one copy after another."""
    link = plan_profile(profile).link
    return sum(link.seconds(g.tensors[t].nbytes, True) for t in g.leaves(*PERSISTENT_KINDS))


def check_share(facts: GraphFacts, device_bytes: int, models: int, planned: bool = False) -> None:
    """ServingError (one line) if each model's share of ``device_bytes`` is below the smallest
    budget one model runs in (``planned``: its plan failed there, whatever the smallest)."""
    share = device_bytes // models
    smallest = facts.smallest_budget
    if planned or share < smallest:
        raise ServingError(f"{models} models on {format_bytes(device_bytes)}: each share of {format_bytes(share)} "
                           f"is below the {format_bytes(smallest)} one model needs; give at least "
                           f"{format_bytes(smallest * models)} or fewer models")


def partition_plan(g: Graph, device_bytes: int, models: int, profile, search_seconds: float = 0.0
                   ) -> PlannedInference:
    """One model's plan under its share of the memory; ServingError if the share cannot run it."""
    planned = plan_inference(g, device_bytes // models, profile=profile, search_seconds=search_seconds)
    if planned.plan is None:
        check_share(GraphFacts(g), device_bytes, models, planned=True)
    return planned


def serving_costs(g: Graph, models: int, device_bytes: int, profile, search_seconds: float = 0.0,
                  partitioned: bool = True) -> Costs:
    """What a batch of ``g`` costs under each strategy with ``models`` copies on ``device_bytes``
    (``partitioned`` False: no partition plan, its times nan)."""
    facts = GraphFacts(g)
    full = plan_inference(g, None, profile=profile).seconds
    weights = weight_bytes(g)
    working = facts.peak_bytes - weights         # one batch's activations (and scratch) at their peak
    resident_models = max(0, (device_bytes - working) // weights)
    if not partitioned:
        return Costs(full, float("nan"), load_seconds(g, profile), int(resident_models), float("nan"))
    plan = partition_plan(g, device_bytes, models, profile, search_seconds).plan
    streamed = [g.tensors[i.target].nbytes for i in plan.program.instrs if i.kind == SWAP_IN and i.copy]
    stream = sum(plan_profile(profile).link.seconds(b, True) for b in streamed)
    return Costs(full, plan.seconds, load_seconds(g, profile), int(resident_models), stream)


def plan_profile(profile) -> Profile:
    return profile_of(profile)


# ---------------------------------------------------------------------------- the server
@dataclass
class _Job:
    model: int
    feeds: dict | None
    arrived: float
    future: Future


class Server:
    """``models`` copies of a forward-only model, each with its own weights and its own
    partition of ``device_bytes``, served first come, first served by one worker thread."""

    def __init__(self, model: str, models: int, device_bytes: int, batch: int | None = 1, size: int | None = None,
                 backend: str | Placement = "cpu", profile: Profile | str = "v100", search_seconds: float = 0.0,
                 link_gbps: float | None = None, device: int = 0, sanitize: bool = False):
        """``backend``: a --backend name (with ``device`` and ``link_gbps``) or a Placement
        already chosen; ``batch`` None: the model's own (engine.library.inference.forward_graph)."""
        if models < 1:
            raise ServingError(f"serve at least one model, got {models}")
        self.graph = forward_graph(model, batch, size)
        self.batch = batch_of(self.graph)
        placement = backend if isinstance(backend, Placement) else choose(backend, device, link_gbps)
        self.plan = partition_plan(self.graph, device_bytes, models, profile, search_seconds).plan
        self._runs, self._backends = [], []
        try:
            for m in range(models):
                run, be = executor_run(self.graph, self.plan.program, placement, sanitize, seed=m)
                self._runs.append(run)
                self._backends.append(be)
        except BaseException:
            self.close()
            raise
        self.latencies: list[float] = []
        self.service: list[float] = []      # seconds the device spent on each batch
        self._jobs: queue.Queue = queue.Queue()
        self._worker = threading.Thread(target=self._serve, name="serving-worker", daemon=True)
        self._worker.start()

    def reset(self) -> None:
        """Forget the latencies and service times recorded so far."""
        self.latencies.clear()
        self.service.clear()

    @property
    def models(self) -> int:
        return len(self._runs)

    def submit(self, model: int, feeds: dict | None = None, arrived: float | None = None) -> Future:
        """Queue a batch for ``model`` (its input arrays, or a synthetic batch); a Future of its
        outputs. ``arrived``: the perf_counter time the batch arrived (default now)."""
        if not 0 <= model < self.models:
            raise ServingError(f"model {model} is not served; models are 0 to {self.models - 1}")
        job = _Job(model, feeds, time.perf_counter() if arrived is None else arrived, Future())
        self._jobs.put(job)
        return job.future

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            t0 = time.perf_counter()
            try:
                out = self._runs[job.model].batch(job.feeds)
            except BaseException as e:       # handed to whoever waits on the batch
                job.future.set_exception(e)
                continue
            end = time.perf_counter()
            self.service.append(end - t0)
            self.latencies.append(end - job.arrived)
            job.future.set_result(out)

    def percentiles(self, qs=(50, 99)) -> dict[float, float]:
        """Latency percentiles (seconds) over the batches served so far."""
        if not self.latencies:
            raise ServingError("no request served yet")
        return {q: float(np.percentile(self.latencies, q)) for q in qs}

    def replay(self, arrivals: Arrivals) -> float:
        """Submit batches at ``arrivals``' times from now (each for its model); wait for all.
        Returns the wall seconds from the first arrival to the last completion."""
        t0 = time.perf_counter()
        futures = []
        for at, m in zip(arrivals.times - arrivals.times[0], arrivals.models):
            delay = t0 + at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            futures.append(self.submit(int(m), arrived=t0 + at))
        for f in futures:
            f.result()
        return time.perf_counter() - t0

    def close(self) -> None:
        if getattr(self, "_worker", None) is not None and self._worker.is_alive():
            self._jobs.put(None)
            self._worker.join()
        for be in self._backends:
            be.close()
        self._backends = []
