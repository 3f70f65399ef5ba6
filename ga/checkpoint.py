"""Search checkpoints: the population after a generation, as JSON, written atomically.

Format ``swapengine.ga-checkpoint/1``: the search's identity (graph name, node count, tensor
sizes, budget, seed, population size, mode, mutation probability), the generation just
finished, the population (schedules as int lists, allocations by ``Allocation.to_dict``,
times with null for infinite), the best individual seen, the initial and ideal times, the
evaluation count, the elapsed search seconds and the history. No RNG state is stored: every
random decision is seeded from (seed, generation, index), so the generation number is enough
to continue exactly where the search stopped.
"""
from __future__ import annotations

import json

from engine.checkpoint import write_atomically
from engine.errors import EngineError
from engine.files import read_json

FORMAT = "swapengine.ga-checkpoint/1"


class SearchCheckpointError(EngineError, ValueError):
    """A checkpoint that cannot be read, or that belongs to another search."""


def save(path: str, state: dict) -> None:
    """Write ``state`` (plus the format tag) to ``path`` atomically (engine.checkpoint)."""
    text = json.dumps({"format": FORMAT, **state}, separators=(",", ":"), allow_nan=False)
    write_atomically(path, lambda f: f.write(text.encode()))


def load(path: str) -> dict:
    """The state saved at ``path``; SearchCheckpointError if it is missing, not JSON or not ours."""
    state = read_json(path, "search checkpoint", SearchCheckpointError, "the JSON file --search-checkpoint wrote")
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise SearchCheckpointError(f"'{path}' is not a search checkpoint (expected format '{FORMAT}')")
    return state


def check_identity(state: dict, identity: dict, path: str) -> None:
    """SearchCheckpointError naming the first field where the checkpoint's search differs from ours."""
    saved = state.get("identity", {})
    for key, value in identity.items():
        if saved.get(key) != value:
            raise SearchCheckpointError(f"checkpoint '{path}' is from another search: its {key} is "
                                  f"{saved.get(key)!r:.60}, this search's is {value!r:.60}")
