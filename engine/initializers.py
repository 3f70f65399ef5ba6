"""Initial values of parameters and state, by initializer name.

Each tensor's values come from a generator seeded by (seed, the tensor's name),
so they do not depend on tensor ids, build order or schedule.
"""
from __future__ import annotations

import zlib

import numpy as np

from .ir import PERSISTENT_KINDS, Graph, GraphError

IMPORTED = "imported"     # the value came with the model (engine.importer): ``Graph.initial_values``


def _fan_in(shape) -> int:
    # [O, I, KH, KW] convolution or [M, K] fully connected weights: fan-in is everything after dim 0.
    return int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0]) if shape else 1


def _fan_out(shape) -> int:
    return int(shape[0] * np.prod(shape[2:])) if len(shape) > 1 else 1


def initial_value(name: str, init: str | None, shape, dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    dtype = np.dtype(dtype)
    kind = init or "zeros"
    if kind == "zeros":
        a = np.zeros(shape)
    elif kind == "ones":
        a = np.ones(shape)
    elif kind == "he_normal":
        a = rng.standard_normal(shape) * np.sqrt(2.0 / max(1, _fan_in(shape)))
    elif kind == "xavier_uniform":
        limit = np.sqrt(6.0 / max(1, _fan_in(shape) + _fan_out(shape)))
        a = rng.uniform(-limit, limit, shape)
    elif kind.startswith("normal:"):
        a = rng.standard_normal(shape) * float(kind.split(":", 1)[1])
    elif kind.startswith(("rope_cos:", "rope_sin:")):
        a = _rope_table(name, kind, shape)
    elif kind == IMPORTED:
        raise GraphError(f"tensor '{name}': its value comes with an imported model "
                         "(Graph.initial_values), not from an initializer")
    else:
        raise GraphError(f"tensor '{name}': unknown initializer '{kind}' "
                         "(known: zeros, ones, he_normal, xavier_uniform, normal:<std>, rope_cos:<theta>, "
                         "rope_sin:<theta>, imported)")
    return a.astype(dtype)


def _rope_table(name: str, kind: str, shape) -> np.ndarray:
    """Rotary position embeddings' cos or sin table [positions, d] (Su et al.; Llama's layout):
    position p, column j turns by p * theta ** (-2 (j mod d/2) / d), both halves alike."""
    fn, theta = kind.split(":", 1)
    try:
        theta = float(theta)
    except ValueError:
        theta = float("nan")
    if len(shape) != 2 or shape[1] % 2 or not theta > 0:
        raise GraphError(f"tensor '{name}': {kind} needs a positive theta and a [positions, even width] shape, "
                         f"got {list(shape)}")
    positions, d = shape
    inv_freq = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    angles = np.outer(np.arange(positions, dtype=np.float64), inv_freq)
    angles = np.concatenate([angles, angles], axis=1)
    return np.cos(angles) if fn == "rope_cos" else np.sin(angles)


def initial_state(g: Graph, seed: int) -> dict[int, np.ndarray]:
    """Arrays for every persistent leaf (parameters and state) of ``g``: drawn by its
    initializer, or, for an imported model's weights, the values it came with (a copy)."""
    state = {}
    for t in g.leaves(*PERSISTENT_KINDS):
        x = g.tensors[t]
        if x.init == IMPORTED:
            value = g.initial_values.get(x.name)
            if value is None or value.shape != x.shape or value.dtype != x.dtype:
                raise GraphError(f"tensor '{x.name}' is imported but its value is missing or is not "
                                 f"{x.dtype}{list(x.shape)}; re-import the model")
            state[t] = np.array(value, copy=True)
        else:
            state[t] = initial_value(x.name, x.init, x.shape, x.dtype, seed)
    return state

