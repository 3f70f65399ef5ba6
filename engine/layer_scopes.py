"""A model's layers, from its node names, in one place.

The zoo's decoders (zoo/gpt.py, zoo/llama.py) build each transformer block inside the scope
``layer_scope(i)``, so every node of block i is named ``block<i>/...``; autodiff names each
gradient node under its forward node (``<forward node>.grad/...``) and each accumulation and
update under its tensor, so a block's backward and updates carry the same prefix. Policies that
act per layer (Megatron's full recomputation, ``planner.policies.full_recompute``) read the
layers here and nowhere else.
"""
from __future__ import annotations

import re

import numpy as np

PREFIX = "block"
_LAYER = re.compile(rf"{PREFIX}(\d+)/")


def layer_scope(i: int) -> str:
    """The scope a model builder opens for its layer ``i``."""
    return f"{PREFIX}{i}"


def layer_of_nodes(g) -> np.ndarray:
    """Per node of ``g``: the layer whose scope names it, or -1 (embeddings, head, loss)."""
    out = np.full(len(g.nodes), -1, dtype=np.int64)
    for n in g.nodes:
        m = _LAYER.match(n.name)
        if m:
            out[n.id] = int(m[1])
    return out
