"""Shared checks for the zoo tests: run one training iteration of a tiny model on the
numpy reference interpreter, and count a graph's forward operators and parameters."""
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
