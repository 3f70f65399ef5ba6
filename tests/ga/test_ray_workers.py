"""The search on Ray actors reaches the process pool's result for a seed, and resumes across them.

Ray is an optional extra (``pip install ".[ray]"``; ``.ci/run`` installs it, so CI runs these).
One local single-node Ray for the module: ``ray.init(num_cpus=2)`` starts in a few seconds.
"""
import json
import time

import pytest

from ga.ray_workers import RayUnavailable, RayWorkers, connect, local_runtime_env
from ga.search import search
from ga.workers import DeadlineReached

from .test_search import cnn_budget, cnn_facts, lstm_tight, quick, same_result
from .helpers import PROFILE

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env=local_runtime_env())
    yield ray
    if started:
        ray.shutdown()


def _offset_state(base):
    return {"base": base}


def _add(state, item):
    if item < 0:
        time.sleep(5)
    return state["base"] + item


def test_results_come_back_in_the_items_order(local_ray):
    workers = RayWorkers(_offset_state, (100,), workers=2, address="local")
    try:
        assert workers.map(_add, list(range(7))) == [100 + i for i in range(7)]
    finally:
        workers.terminate()


def test_a_deadline_returns_the_finished_prefix_and_stops_the_actors(local_ray):
    workers = RayWorkers(_offset_state, (0,), workers=2, address="local")
    assert workers.map(_add, [1]) == [1]     # the actors are up
    with pytest.raises(DeadlineReached) as caught:
        # item -1 sleeps 5 s, past the deadline whatever the load; the 3 s before it leave item 1 time
        # to return on a busy machine (1 s could fail from load alone: issue 39)
        workers.map(_add, [1, -1, 2, 3], deadline=time.monotonic() + 3.0)
    assert caught.value.results[:1] == [1] and len(caught.value.results) <= 1
    with pytest.raises(RuntimeError, match="terminated"):
        workers.map(_add, [1])


def test_the_search_on_ray_finds_the_process_pools_best_plan(local_ray):
    facts, budget = lstm_tight()
    on_processes = search(facts, budget, PROFILE, quick(workers=2, max_generations=3))
    on_ray = search(facts, budget, PROFILE, quick(workers=2, max_generations=3, ray_address="local"))
    same_result(on_processes, on_ray)


def test_a_search_checkpointed_on_processes_resumes_on_ray(local_ray, tmp_path):
    facts, budget = cnn_facts(), cnn_budget()
    whole = search(facts, budget, PROFILE, quick(max_generations=4))
    path = str(tmp_path / "ga.json")
    search(facts, budget, PROFILE, quick(max_generations=2, checkpoint=path))
    resumed = search(facts, budget, PROFILE, quick(max_generations=4, checkpoint=path, resume=True, workers=2,
                                                  ray_address="local"))
    same_result(whole, resumed)
    assert json.load(open(path))["generation"] == 4


def test_an_unreachable_cluster_is_one_clear_line(monkeypatch):
    monkeypatch.setattr(ray, "is_initialized", lambda: False)

    def refuse(*args, **kwargs):
        raise ConnectionError("Could not find any running Ray instance")
    monkeypatch.setattr(ray, "init", refuse)
    with pytest.raises(RayUnavailable, match="ray start --head"):
        connect("auto", None)


def test_an_address_nothing_listens_at_is_refused_at_once(monkeypatch):
    """Issue 39's harness: ray.init(address=HOST:PORT) with nothing listening there waited minutes
    (--ray-address 192.0.2.1:6379 hung the run); a probe of the port says so in seconds."""
    import socket
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    with socket.socket() as s:          # a port just freed: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tried = []
    monkeypatch.setattr(ray, "init", lambda *a, **k: tried.append(k))      # (it waited minutes)
    t0 = time.perf_counter()
    with pytest.raises(RayUnavailable, match=rf"cannot reach a Ray cluster at '127\.0\.0\.1:{port}': nothing answers "
                                             rf"at 127\.0\.0\.1:{port} within 5 s \(Connection refused\)"):
        connect(f"127.0.0.1:{port}", None)
    assert not tried and time.perf_counter() - t0 < 30


def test_local_actors_import_the_drivers_copy_of_the_engine(local_ray):
    """Actors started here import the engine from where the driver did, not from whatever copy
    is installed: the same code, and numba's cache of the swap pass (kept by source path) read
    instead of compiled again in every actor."""
    import ga

    @ray.remote
    def where():
        import ga
        return ga.__file__

    assert ray.get(where.remote()) == ga.__file__


def _writable_flags(state, item):
    return bool(state["base"].flags.writeable), bool(item.flags.writeable)


def test_actors_get_writable_arrays(local_ray):
    """Ray hands an actor its arguments' arrays read-only; numba would compile the swap pass
    again for read-only arrays in every actor instead of reading the driver's cache. The state's
    arrays and each task's are writable copies."""
    import numpy as np
    big = np.arange(1 << 16, dtype=np.int64)          # past Ray's inline size: held in its object store
    workers = RayWorkers(_offset_state, (big,), workers=1, address="local")
    try:
        assert workers.map(_writable_flags, [big, big[:3]]) == [(True, True), (True, True)]
    finally:
        workers.terminate()
