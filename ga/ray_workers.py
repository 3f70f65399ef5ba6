"""Evaluation on a Ray cluster: the same contract as ``workers.ProcessWorkers``.

``RayWorkers(make_state, state_args, workers, address)`` starts ``workers`` Ray actors (one
CPU each; default: every CPU the cluster has), each building ``make_state(*state_args)`` once,
so tasks carry only their own data, as in ``ProcessWorkers``. ``map(fn, items, deadline)``
hands each idle actor the next item and returns ``fn(state, item)`` for every item in the
items' order, so the search's result for a seed does not depend on where it ran. Past the
deadline it kills the actors and raises ``DeadlineReached`` with the finished prefix, as
``ProcessWorkers`` does.

Ray is an optional extra (``pip install ".[ray]"``). ``address``: ``"local"`` starts Ray on
this machine with ``workers`` CPUs; ``"auto"`` joins the cluster ``ray start --head`` started
here; anything else is passed to ``ray.init(address=...)`` (``"ray://host:10001"``). Every
node of a cluster needs this package installed (``pip install .``): actors import it.
If Ray is already initialized in this process (a test's ``ray.init(num_cpus=2)``), that
session is used and left running.
"""
from __future__ import annotations

import copy
import ipaddress
import os
import re
import socket
import time
from typing import Callable, Sequence

from engine.errors import EngineError

from .workers import DeadlineReached


class RayUnavailable(EngineError, RuntimeError):
    """Ray is not installed, or the cluster named cannot be reached."""


def _ray():
    try:
        import ray
    except ImportError:
        raise RayUnavailable("searching on Ray needs Ray installed: pip install \".[ray]\" "
                             "(or search on this machine's processes: leave out --ray-address)") from None
    return ray


_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
FORMS = "'local', 'auto', HOST:PORT (a cluster's head) or ray://HOST:PORT (Ray Client, port 10001 by default)"


def address_problem(address: str) -> str | None:
    """What is wrong with the form of a Ray address, or None: 'local', 'auto', HOST:PORT or
    ray://HOST:PORT with a host name, an IPv4 address or a bracketed IPv6 one and a port from
    1 to 65535. Whether a cluster answers there is ``connect``'s question."""
    if address in ("local", "auto"):
        return None
    rest = address[len("ray://"):] if address.startswith("ray://") else address
    host, colon, port = rest.rpartition(":")
    why = None
    if not colon or "/" in rest:
        why = "no HOST:PORT" if "://" not in rest else f"the scheme '{rest.split('://')[0]}' is not ray://"
    elif not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        why = f"the port '{port}' is not a number from 1 to 65535"
    elif host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            why = f"'{host}' is not an IPv6 address"
    elif host.replace(".", "").isdigit():
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            why = f"'{host}' is not an IPv4 address"
    elif not (host and len(host) <= 253 and all(_HOST_LABEL.fullmatch(x) for x in host.split("."))):
        why = f"'{host}' is not a host name" if host else "no host"
    return None if why is None else f"{why}; give {FORMS}"


def _writable(value):
    """``value`` with every numpy array in it a writable copy. Ray hands an actor the arrays of
    its arguments read-only (views of its object store), and numba types a read-only array
    apart from a writable one: the swap pass and the simulator were compiled again for them in
    every actor (minutes each on two cores) instead of read from the cache the driver wrote."""
    return copy.deepcopy(value)


class _StateHolder:
    """One actor: the state built once, then ``fn(state, item)`` per task."""

    def __init__(self, make_state_and_args):
        make_state, state_args = _writable(make_state_and_args)
        self.state = make_state(*state_args)

    def run(self, fn, item):
        return fn(self.state, _writable(item))


PROBE_SECONDS = 5.0


def unanswered(address: str) -> str | None:
    """Why nothing answers at a HOST:PORT (or ray://HOST:PORT) address, or None: ray.init waited
    minutes on an address nothing listens at. 'local' and 'auto' are Ray's to find."""
    if address in ("local", "auto"):
        return None
    host, _, port = (address[len("ray://"):] if address.startswith("ray://") else address).rpartition(":")
    host = host[1:-1] if host.startswith("[") else host
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_SECONDS).close()
    except OSError as e:
        return f"nothing answers at {address} within {PROBE_SECONDS:g} s ({e.strerror or e})"
    return None


def local_runtime_env() -> dict:
    """Ray's runtime environment for actors on this machine: this copy of the engine first on
    their path. Without it an actor imports whatever copy the interpreter has installed, which
    for a driver run from a clone (the tests, a checkout with local changes) is other code, and
    numba keys its cache by source path, so every actor compiled the swap pass again (minutes
    each on two cores) instead of reading the cache the driver wrote."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return {"env_vars": {"PYTHONPATH": path}}


def connect(address: str, workers: int | None):
    """Initialize Ray for ``address`` unless this process already has; return the module."""
    problem = address_problem(address)
    if problem:
        raise RayUnavailable(f"Ray address '{address}': {problem}")
    ray = _ray()
    if ray.is_initialized():
        return ray
    why = unanswered(address)
    if why:
        raise RayUnavailable(f"cannot reach a Ray cluster at '{address}': {why}; start one with 'ray start --head', "
                             "or use --ray-address local")
    kwargs = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        if address == "local":
            ray.init(num_cpus=workers, runtime_env=local_runtime_env(), **kwargs)
        else:
            ray.init(address=address, **kwargs)
    except ConnectionError as e:
        raise RayUnavailable(f"cannot reach a Ray cluster at '{address}' ({e}); start one with "
                             f"'ray start --head', or use --ray-address local") from None
    return ray


class RayWorkers:
    def __init__(self, make_state: Callable, state_args: tuple, workers: int | None = None,
                 address: str = "local"):
        self._ray = ray = connect(address, workers)
        if workers is None:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.workers = int(workers)
        holder = ray.remote(num_cpus=1)(_StateHolder)
        shared = ray.put((make_state, state_args))   # one copy in the object store, not one per actor
        self._actors = [holder.remote(shared) for _ in range(self.workers)]

    def map(self, fn: Callable, items: Sequence, deadline: float | None = None) -> list:
        """``[fn(state, item) for item in items]``, in order; past ``deadline`` (time.monotonic)
        raises DeadlineReached with the results finished before it, in order."""
        ray = self._ray
        if not self._actors:
            raise RuntimeError("these Ray workers were terminated")
        results: list = [None] * len(items)
        finished = [False] * len(items)
        idle = list(self._actors)
        running: dict = {}          # ObjectRef -> (item index, actor)
        next_item = 0
        while next_item < len(items) or running:
            while idle and next_item < len(items):
                actor = idle.pop()
                running[actor.run.remote(fn, items[next_item])] = (next_item, actor)
                next_item += 1
            left = None if deadline is None else deadline - time.monotonic()
            ready = []
            if left is None or left > 0:
                ready, _ = ray.wait(list(running), num_returns=1, timeout=left)
            if not ready:
                self.terminate()
                done = 0
                while done < len(items) and finished[done]:
                    done += 1
                raise DeadlineReached(results[:done])
            for ref in ready:
                index, actor = running.pop(ref)
                results[index] = ray.get(ref)
                finished[index] = True
                idle.append(actor)
        return results

    @property
    def alive(self) -> bool:
        """False once terminated (as a deadline does): ``map`` would then refuse."""
        return bool(self._actors)

    def terminate(self) -> None:
        for actor in self._actors:
            self._ray.kill(actor)
        self._actors = []

    close = terminate   # actors hold nothing worth waiting for once the last result is in

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.terminate()
