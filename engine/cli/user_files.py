"""The user's own files in and out of a run: --data (arrays to train on) and --save-weights
(the trained parameters), each refused in one line before any work (preflight.py's rule)."""
from __future__ import annotations

import numpy as np

from .. import checkpoint
from ..ir import Graph
from ..user_data import ArrayData, read_data_file
from ..weights import weights_format, write_parameters
from .config import RunConfig
from .flags import UsageError
from .preflight import check_names, check_writable_file


def check_user_files(cfg: RunConfig) -> dict[str, np.ndarray] | None:
    """Check --save-weights' path and read --data's arrays (returned; None without --data)."""
    check_names((("--data", cfg.data), ("--save-weights", cfg.save_weights)))
    if cfg.simulate_only:
        for flag, given in (("--data", cfg.data), ("--save-weights", cfg.save_weights)):
            if given:
                raise UsageError(f"{flag} is about training, which --simulate-only does not do; drop one of them")
    if cfg.save_weights:
        weights_format(cfg.save_weights)
        check_writable_file(cfg.save_weights, "--save-weights")
        checkpoint.remove_stale_temporaries(cfg.save_weights)
    return read_data_file(cfg.data) if cfg.data else None


def data_for(cfg: RunConfig, g: Graph, arrays: dict[str, np.ndarray]) -> ArrayData:
    """--data's arrays checked against the built model's inputs (one line on a mismatch)."""
    return ArrayData(g, arrays, cfg.seed, f"--data {cfg.data}")


def save_weights(cfg: RunConfig, g: Graph, state: dict[int, np.ndarray]) -> str:
    """Write the parameters of ``state`` (tensor id -> array) by name; returns the format."""
    ext, count = write_parameters(cfg.save_weights, g, {g.tensors[t].name: a for t, a in state.items()})
    return f"{ext[1:]}, {count} tensors"
