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
import math
from dataclasses import fields

from allocator.size_classes import Allocation
from engine.checkpoint import write_atomically
from engine.errors import EngineError
from engine.files import read_json

from .history import GenerationStats

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


FIELDS = {"identity": dict, "generation": int, "population": list, "evaluations": int,
          "elapsed_s": (int, float), "history": list}


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _individual_problem(d, nodes) -> str | None:
    """What is wrong with an individual as ``Individual.to_dict`` writes it (" has no 'schedule'",
    "'s 'time' is ..."), or None."""
    if not isinstance(d, dict):
        return f" is a {type(d).__name__}, not an object"
    for key in ("schedule", "allocation"):
        if key not in d:
            return f" has no '{key}'"
    schedule = d["schedule"]
    n = nodes if isinstance(nodes, int) and not isinstance(nodes, bool) else None
    if (not isinstance(schedule, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in schedule)
            or sorted(schedule) != list(range(len(schedule))) or (n is not None and len(schedule) != n)):
        return f"'s 'schedule' is not an order of the graph's {'' if n is None else f'{n} '}nodes"
    try:
        Allocation.from_dict(d["allocation"])
    except (ValueError, TypeError, OverflowError) as e:
        return f"'s 'allocation' is malformed ({e})"
    if d.get("time") is not None and not (_number(d["time"]) and d["time"] >= 0):
        return f"'s 'time' is not a number of seconds (got {d['time']!r:.40})"
    options = d.get("options", {})
    if not isinstance(options, dict) or not all(
            isinstance(v, (int, float, str)) or v is None for v in options.values()):
        return "'s 'options' is not an object of numbers and names"
    return None


def check_state(state: dict, path: str) -> None:
    """SearchCheckpointError (one line) unless every field ``ga.search`` reads from ``state``
    is present, of its type and in range: what resuming needs before it trusts the file."""
    def bad(why: str):
        return SearchCheckpointError(f"search checkpoint '{path}' is malformed: {why}; delete it to search afresh")

    for key, kind in FIELDS.items():
        if not isinstance(state.get(key), kind) or isinstance(state.get(key), bool):
            raise bad(f"'{key}' is missing or not a {getattr(kind, '__name__', 'number')}")
    if state["generation"] < 0:
        raise bad(f"'generation' is {state['generation']}; it counts generations from 0")
    if state["evaluations"] < 0:
        raise bad(f"'evaluations' is {state['evaluations']}; it counts evaluations from 0")
    if not (_number(state["elapsed_s"]) and state["elapsed_s"] >= 0):
        raise bad(f"'elapsed_s' is {state['elapsed_s']!r:.40}, not a number of seconds")
    if not state["population"]:         # resumed as a fresh search, silently
        raise bad("'population' is empty; a search checkpoint holds at least one individual")
    nodes = state["identity"].get("nodes")
    for i, d in enumerate(state["population"]):
        why = _individual_problem(d, nodes)
        if why:
            raise bad(f"population entry {i}{why}")
    if state.get("best") is not None:
        why = _individual_problem(state["best"], nodes)
        if why:
            raise bad(f"the best individual{why}")
    names = [f.name for f in fields(GenerationStats)]
    for i, row in enumerate(state["history"]):
        missing = [k for k in names if not isinstance(row, dict) or k not in row
                   or not (row[k] is None or _number(row[k]))]
        if missing:
            raise bad(f"history row {i} has no number for '{missing[0]}'")
    for key in ("initial_time", "initial_best", "ideal_time"):
        if state.get(key) is not None and not _number(state[key]):
            raise bad(f"'{key}' is {state[key]!r:.40}, not a number of seconds")
    remembered = state.get("remembered", [])
    if not isinstance(remembered, list):
        raise bad("'remembered' is not a list of genome keys")
    for key in remembered:
        try:
            bytes.fromhex(key)
        except (TypeError, ValueError):
            raise bad(f"'remembered' holds {key!r:.40}, not a genome key") from None


def check_identity(state: dict, identity: dict, path: str) -> None:
    """SearchCheckpointError naming the first field where the checkpoint's search differs from ours."""
    saved = state.get("identity", {})
    for key, value in identity.items():
        if saved.get(key) != value:
            raise SearchCheckpointError(f"checkpoint '{path}' is from another search: its {key} is "
                                  f"{saved.get(key)!r:.60}, this search's is {value!r:.60}")
