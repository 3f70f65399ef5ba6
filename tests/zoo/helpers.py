"""Shared checks for the zoo tests: run one training iteration of a tiny model on the
numpy reference interpreter, count a graph's forward operators and parameters, and train a
Program on the sanitizing cpu backend beside the unlimited run."""
from __future__ import annotations

import numpy as np

from engine import reference
from engine.data import _loss_reader
from engine.initializers import initial_state
from engine.ir import Graph, Kind


def random_feeds(g: Graph, seed: int = 0) -> dict[int, np.ndarray]:
    """Small random inputs, and labels in range of the classifier that reads them."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for t in g.leaves(Kind.INPUT):
        x = g.tensors[t]
        feeds[t] = rng.standard_normal(x.shape).astype(x.dtype)
    for t in g.leaves(Kind.LABEL):
        x = g.tensors[t]
        reader = _loss_reader(g, t)            # through reshapes (DeepLab's per-pixel labels)
        classes = g.shape(reader.inputs[0])[1]
        feeds[t] = rng.integers(0, classes, x.shape).astype(x.dtype)
    return feeds


def train_once(g: Graph) -> float:
    """One iteration (forward, backward, update); checks the loss is finite and that every
    parameter and every piece of state moved. Returns the loss."""
    assert g.loss is not None, f"{g.name} has no loss"
    state = initial_state(g, seed=0)
    nexts = [nxt for _, nxt in g.state_pairs]
    out = reference.run(g, {**state, **random_feeds(g)}, keep=nexts + [g.loss])
    loss = float(out[g.loss])
    assert np.isfinite(loss), f"{g.name}: loss is {loss}"
    params = set(g.leaves(Kind.PARAMETER))
    assert params <= {cur for cur, _ in g.state_pairs}, "a parameter has no update"
    for cur, nxt in g.state_pairs:
        after = out[nxt]
        assert np.all(np.isfinite(after)), f"{g.tensors[nxt].name} is not finite"
        if cur in params:
            assert not np.array_equal(after, state[cur]), f"parameter {g.tensors[cur].name} did not change"
    return loss


def forward_operators(g: Graph) -> int:
    """Nodes of the forward pass (their first output is an activation, not a gradient or update)."""
    return sum(g.tensors[n.outputs[0]].kind == Kind.ACTIVATION for n in g.nodes)


def parameter_count(g: Graph) -> int:
    return sum(int(np.prod(g.shape(t))) for t in g.leaves(Kind.PARAMETER))


def ops_by_name(g: Graph) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in g.nodes:
        counts[n.op] = counts.get(n.op, 0) + 1
    return counts


# A PCIe-like emulated link for the cpu backend: copies take long enough to overlap compute.
LINK_GBPS = dict(h2d_bytes_per_s=20e9, d2h_bytes_per_s=20e9, duplex_bytes_per_s=32e9, latency_s=0)


def differs_from_unlimited(g: Graph, program, backend_seed: int = 0, steps: int = 3) -> list[str]:
    """The names of the persistent tensors whose values after ``steps`` iterations of ``program``
    on the cpu backend (sanitizer on: freed bytes poisoned, copies jittered) differ from the
    unlimited run's; empty when training is bit-identical."""
    from engine.backends.cpu import CpuBackend, EmulatedLink
    from engine.executor import ProgramExecutor
    from engine.training import Trainer

    ref = Trainer(g, seed=0)
    for _ in range(steps):
        ref.step()
    backend = CpuBackend(EmulatedLink(**LINK_GBPS), sanitize=True, seed=backend_seed, jitter_s=2e-4)
    try:
        tr = Trainer(g, seed=0, runner=ProgramExecutor(program, g, backend))
        for _ in range(steps):
            tr.step()
        state = tr.state
    finally:
        backend.close()
    return [g.tensors[t].name for t, a in ref.state.items() if not np.array_equal(a, state[t])]
