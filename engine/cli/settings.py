"""The run's settings as --json records them and --config replays them: one table, so a
setting recorded is a setting that can be read back.

Each row names the key in the report's ``settings``, the flag that sets it, the value the
run's RunConfig holds, and how a recorded value becomes that flag's words again (None: the
flag was left at its default). Output paths (--out, --json, --checkpoint, ...) are not
settings: a replayed run writes its own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .config import RunConfig


def _plain(flag: str):
    return lambda v: [flag, str(v)]


def _switch(flag: str):
    """A store_true flag: true gives the flag, false nothing (its default)."""
    return lambda v: [flag] if v else []


def _bytes(flag: str):
    return lambda v: [flag, f"{v}B"]


@dataclass(frozen=True)
class Setting:
    key: str
    flag: str
    types: tuple[type, ...]                # the JSON types a recorded value may have (besides null)
    of: Callable[[RunConfig], object]      # the value a run records
    words: Callable[[object], list[str]]   # the command-line words that give it back


SETTINGS: tuple[Setting, ...] = (
    Setting("model", "--model", (str,), lambda c: c.model, _plain("--model")),
    Setting("batch", "--batch", (int,), lambda c: c.batch, _plain("--batch")),
    Setting("size", "--size", (int,), lambda c: c.size, _plain("--size")),
    Setting("dtype", "--dtype", (str,), lambda c: c.dtype, _plain("--dtype")),
    Setting("iterations", "--iterations", (int,), lambda c: c.iterations, _plain("--iterations")),
    Setting("seed", "--seed", (int,), lambda c: c.seed, _plain("--seed")),
    Setting("optimizer", "--optimizer", (str,), lambda c: c.optimizer, _plain("--optimizer")),
    Setting("lr", "--lr", (int, float), lambda c: c.lr, lambda v: ["--lr", repr(float(v))]),
    Setting("momentum", "--momentum", (int, float), lambda c: c.momentum, lambda v: ["--momentum", repr(float(v))]),
    Setting("weight_decay", "--weight-decay", (int, float), lambda c: c.weight_decay,
            lambda v: ["--weight-decay", repr(float(v))]),
    Setting("memory_bytes", "--memory", (int,), lambda c: c.memory, _bytes("--memory")),
    Setting("policies", "--policy", (list, str), lambda c: [p.name for p in c.policies],
            lambda v: ["--policy", v if isinstance(v, str) else ",".join(map(str, v))]),
    Setting("sanitize", "--sanitize", (bool,), lambda c: c.sanitize, _switch("--sanitize")),
    Setting("simulate_only", "--simulate-only", (bool,), lambda c: c.simulate_only, _switch("--simulate-only")),
    Setting("allocator", "--allocator", (str,), lambda c: c.allocator, _plain("--allocator")),
    Setting("chunk_bytes", "--chunk-mib", (int,), lambda c: c.chunk_bytes,
            lambda v: ["--chunk-mib", repr(v / 2**20)]),
    Setting("measure_iterations", "--measure-iterations", (int,), lambda c: c.measure_iterations,
            _plain("--measure-iterations")),
    Setting("backend", "--backend", (str,), lambda c: c.backend, _plain("--backend")),
    Setting("device", "--device", (int,), lambda c: c.device, _plain("--device")),
    Setting("link_gbps", "--link-gbps", (int, float), lambda c: c.link_gbps,
            lambda v: ["--link-gbps", repr(float(v))]),
    Setting("profile", "--profile", (str,), lambda c: c.profile, _plain("--profile")),
    Setting("search_seconds", "--search-seconds", (int, float), lambda c: c.search.seconds,
            lambda v: ["--search-seconds", repr(float(v))]),
    Setting("search_generations", "--search-generations", (int,), lambda c: c.search.generations,
            _plain("--search-generations")),
    Setting("population", "--population", (int,), lambda c: c.search.population, _plain("--population")),
    Setting("window_bytes", "--window", (int,), lambda c: c.window, _bytes("--window")),
    Setting("swap_only", "--swap-only", (bool,), lambda c: c.swap_only, _switch("--swap-only")),
    Setting("check", "--no-check", (bool,), lambda c: c.check, lambda v: [] if v else ["--no-check"]),
    Setting("data", "--data", (str,), lambda c: c.data, _plain("--data")),
    Setting("ranks", "--ranks", (int,), lambda c: c.ranks, _plain("--ranks")),
)
BY_KEY = {s.key: s for s in SETTINGS}


def settings_of(cfg: RunConfig) -> dict:
    """The report's ``settings``: every row's value for this run."""
    return {s.key: s.of(cfg) for s in SETTINGS}
