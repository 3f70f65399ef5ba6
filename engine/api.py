"""The Python API: build a model, plan it under a memory budget, verify, simulate,
train it bit-identically. What ``python -m engine.train`` does, as a few functions.

    from engine import api as se

    g = se.model("small-lstm", batch=8)                  # the training graph (forward, backward, SGD)
    p = se.plan(g, "swapadvisor", memory="20KiB", profile="v100")   # verified; p.seconds simulated
    run = se.train(g, p, iterations=10)                  # on the CPU backend, three stream threads
    ref = se.train(g, None, iterations=10)               # the unlimited numpy reference
    assert se.identical(run, ref)                        # bit for bit, whatever the budget
    own = se.train(g, p, data="data.npz")                # your arrays (or a dict of them, or batches)
    se.save_weights(g, own, "weights.safetensors")       # for PyTorch / Hugging Face (or .npz)

Units: sizes are bytes (an int) or a string with a binary unit ("64MiB"); times are seconds.
Every bad input raises ``se.EngineError`` whose message is one line (the command line prints
it and exits 2). Policies and allocators and their names come from the registries:
``se.policies()``, ``se.allocators()``.

A thin facade: planning is engine/library/planning.py's (the command line plans there too),
models engine/library/models.py's. Like the command line it sits on top; the command line's
``engine.infer`` and ``engine.serve`` use it, nothing below imports it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from allocator import registry as _allocators
from engine.backend_registry import choose as _choose_backend
from engine.errors import EngineError  # noqa: F401  (se.EngineError)
from engine.executor import ProgramExecutor
from engine.ir import Graph
from engine.library import planning as _planning
from engine.library.models import model_graph
from engine.library.planning import Plan
from engine.profile import Profile
from engine.training import ReferenceRunner, Trainer
from engine.user_data import user_data as _user_data
from engine.weights import write_parameters as _write_parameters
from planner import policy as _registry

__all__ = ["EngineError", "Plan", "Trained", "allocators", "identical", "model", "plan", "policies", "profile",
           "save_weights", "train"]


def model(name: str = "small-cnn", *, batch: int | None = None, size: int | None = None, dtype: str = "float32",
          optimizer: str | None = None, lr: float | None = None, momentum: float = 0.9,
          weight_decay: float = 1e-4) -> Graph:
    """The training graph of a model named as ``--model`` names it: small-cnn, small-lstm, a
    zoo name (wresnet-D-X, inception-X, nasnet-R, rnn-L-XK, brnn-L-XK, resnet-D, gpt-...), or the
    folder of an imported PyTorch model (``python -m engine.importer``; its shapes are fixed).
    ``batch``/``size`` None: the model's own. ``optimizer`` None: the model's own."""
    return model_graph(name, batch, size, dtype, optimizer, lr, momentum, weight_decay)


def policies() -> list[str]:
    """The registered policies' names (ideal, odswap, swapadvisor, reference, ...)."""
    return list(_registry.names())


def allocators() -> list[str]:
    """The registered allocators' names (auto, pool, bestfit, va, ...): ``plan(allocator=)``."""
    return _allocators.names()


def profile(spec: str | Profile = "v100") -> Profile:
    """A profile: a device name for an analytic one (v100, h100), a JSON file that
    ``--save-profile`` wrote, or a Profile as is."""
    return _planning.profile_of(spec)


def plan(graph: Graph, policy: str = "swapadvisor", *, memory: int | str | None = None,
         profile: str | Profile = "v100", search_seconds: float = 0.0, seed: int = 0,
         allocator: str | None = None, chunk_bytes: int | None = None) -> Plan:
    """Plan ``graph`` with ``policy`` under ``memory`` device bytes (None: 0.3 of the
    unlimited peak, or the smallest budget at which the policy plans, whichever is larger),
    verify it, simulate it on ``profile``. ``allocator``: how tensors are placed (``allocators()``;
    None: the policy's own), ``chunk_bytes`` its chunk (va, auto).
    ``search_seconds`` > 0 runs the genetic search first (for the policy that searches)."""
    return _planning.plan_named(graph, policy, memory, profile, search_seconds, seed, allocator, chunk_bytes)


@dataclass(frozen=True)
class Trained:
    """The state after training (tensor name -> array) and each iteration's loss."""
    state: dict[str, np.ndarray]
    losses: list[float]
    seconds_per_iteration: float


def train(graph: Graph, plan: Plan | None = None, *, iterations: int = 10, seed: int = 0, backend: str = "cpu",
          sanitize: bool = False, link_gbps: float | None = None, data=None) -> Trained:
    """Train ``graph`` for ``iterations``: ``plan``'s Program on ``backend`` (cpu: numpy kernels
    on three stream threads and an emulated link; cuda; auto), or, with ``plan`` None, the
    unlimited-memory numpy reference. ``data``: None for synthetic data; a path to an npz or a
    mapping of the graph's input and label names to whole data sets ([samples, ...], visited
    in a fresh order each epoch from ``seed``, as ``--data`` is); or an iterable of batches (each
    such a mapping of one batch), one per iteration. Arrays that do not fit the graph's inputs
    raise EngineError naming the array and what the graph wants."""
    data = _user_data(graph, data, seed)
    if plan is None:
        return _train(Trainer(graph, seed=seed, runner=ReferenceRunner(graph), data=data), iterations)
    placement = _choose_backend(backend, 0, link_gbps)
    device = placement.kind.create(placement, sanitize, seed)
    try:
        return _train(Trainer(graph, seed=seed, runner=ProgramExecutor(plan.program, graph, device), data=data),
                      iterations)
    finally:
        device.close()


def _train(trainer: Trainer, iterations: int) -> Trained:
    losses, times = [], []
    for _ in range(iterations):
        losses.append(trainer.step())
        times.append(trainer.step_seconds)
    return Trained(trainer.named_state(), losses, float(np.median(times)) if times else 0.0)


def identical(a: Trained, b: Trained) -> bool:
    """Bit for bit the same state (NaNs included: a diverged run can still be identical)."""
    return a.state.keys() == b.state.keys() and all(
        np.array_equal(a.state[k], b.state[k], equal_nan=True) for k in a.state)


def save_weights(graph: Graph, trained: Trained, path: str) -> None:
    """Write ``trained``'s parameters (not the optimizer's state) by name to ``path``: a
    ``.safetensors`` file (torch: ``safetensors.torch.load_file``) or an ``.npz``."""
    _write_parameters(path, graph, trained.state)
