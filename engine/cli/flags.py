"""The flags of `python -m engine.train`, and how a bad one is reported.

Kept apart from the orchestration (engine/cli/run.py) so the whole command line can be
read in one place; every flag type raises argparse's error, which becomes a
:class:`UsageError`: one line on stderr, exit status 2. Policies and backends are listed
from their registries (``planner.policy``, ``engine.backend_registry``).
"""
from __future__ import annotations

import argparse
import threading

from allocator.registry import names as allocator_names
from planner import policy as policies_registry

from .. import backend_registry
from ..autodiff import OPTIMIZERS
from ..errors import UsageError  # noqa: F401  (defined in engine.errors; the command line raises it)
from ..units import checked_size, parse_bytes
from .report_json import tool_version

PROG = "engine.train"


class _DefaultsShown(argparse.HelpFormatter):
    """Every option's default in --help, unless its help already says it."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return text
        shown = ",".join(action.default) if isinstance(action.default, list) else action.default
        return f"{text} (default {shown})"


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see --help)")


def _number(kind, text: str, what: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not {what}") from None


MAX_COUNT = 2**63 - 1     # counts are 64-bit where they meet numpy (--batch 2**70 was an OverflowError)


def _count(text: str, least: int) -> int:
    v = _number(int, text, "an integer")
    if v < least:
        raise argparse.ArgumentTypeError(f"must be positive, got {v}" if least else f"must be 0 or more, got {v}")
    if v > MAX_COUNT:
        shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]}"
        raise argparse.ArgumentTypeError(f"{shown} is more than a 64-bit count holds; give at most 2**63 - 1")
    return v


def positive_int(text: str) -> int:
    return _count(text, 1)


def nonnegative_int(text: str) -> int:
    return _count(text, 0)


def positive_float(text: str) -> float:
    """A finite number above 0 (inf and nan are refused: --lr inf diverges, --link-gbps inf
    overflows the emulated link)."""
    v = _number(float, text, "a number")
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite positive number, got '{text}'")
    return v


def mebibytes(text: str) -> float:
    """A finite positive number of MiB within what a device holds (--chunk-mib 1e300 was refused
    only after profiling, with a 300-digit size in the message)."""
    v = positive_float(text)
    if round(v * 2**20) < 1:          # --chunk-mib 1e-9 was 0 bytes: taken as not given
        raise argparse.ArgumentTypeError(f"'{text}' MiB is less than a byte")
    try:
        checked_size(int(round(v * 2**20)), f"{text}MiB")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return v


SEED_LIMIT = 2**32        # numpy's seeds are unsigned 32-bit words


def seed(text: str) -> int:
    v = _number(int, text, "an integer")
    if not 0 <= v < SEED_LIMIT:
        raise argparse.ArgumentTypeError(f"must be 0 to {SEED_LIMIT - 1}, got {v}")
    return v


def nonnegative_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0 <= v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a non-negative number, got '{text}'")
    return v


def seconds(text: str) -> float:
    """A duration: a non-negative number of seconds that Python's waits can take (at most
    threading.TIMEOUT_MAX, 292 years; --search-seconds 2**70 searched on forever)."""
    v = nonnegative_float(text)
    if v > threading.TIMEOUT_MAX:
        raise argparse.ArgumentTypeError(f"'{text[:40]}' seconds is longer than a wait can be; give at most "
                                         f"{threading.TIMEOUT_MAX:.4g}")
    return v


def window(text: str) -> int | None:
    """--window: a size with a unit, or "auto" (None: searched on the simulator)."""
    return None if text.strip().lower() == "auto" else size(text)


def size(text: str) -> int:
    """A size with a binary unit; a bare number is refused (--memory 64 meaning 64 bytes
    surprised people): write 64B for bytes."""
    if text.strip().replace(".", "", 1).isdigit():
        raise argparse.ArgumentTypeError(f"'{text}' has no unit; write {text.strip()}B for bytes, or e.g. "
                                         f"{text.strip()}MiB")
    try:
        return parse_bytes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def policies(text: str) -> list[str]:
    """Registered policy names, comma-separated (checked against the registry)."""
    names = [x.strip().lower() for x in text.split(",") if x.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"unknown policy '{text}' "
                                         f"(choose from {', '.join(policies_registry.names())})")
    for name in names:
        try:
            policies_registry.get(name)
        except policies_registry.UnknownPolicy as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return names


def _policy_help() -> str:
    listed = "; ".join(f"{p.name}: {p.summary}" for p in policies_registry.REGISTRY.values())
    return (f"swap policies to compare ({listed}); the last one trains for --iterations, the others are "
            f"timed on --measure-iterations (default: {','.join(policies_registry.DEFAULT_NAMES)})")


def _allocator_help() -> str:
    from allocator.registry import REGISTRY
    listed = "; ".join(f"{a.name}: {a.summary}" for a in REGISTRY.values())
    return (f"how the policies place tensors ({listed}); a policy that cannot use it is refused "
            f"(default: each policy's own)")


def _backend_help() -> str:
    listed = "; ".join(f"{k.name}: {k.summary}" for k in backend_registry.REGISTRY.values())
    return (f"where the policies run ({listed}), or auto: the first of "
            f"{', '.join(backend_registry.AUTO_PREFERENCE)} that has a device (default auto)")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=f"python -m {PROG}",
                description="Train a model on synthetic data (or your own: --data) and report throughput.",
                allow_abbrev=False, formatter_class=_DefaultsShown)
    p.add_argument("--version", action="version", version=f"swapengine {tool_version()}")
    p.add_argument("--config", metavar="FILE",
                   help="take the settings from this JSON file: a report --json wrote (its \"settings\"), or an "
                        "object of those keys; flags given beside it win")
    model = p.add_argument_group("model and data")
    training = p.add_argument_group("training")
    memory = p.add_argument_group("memory and policies")
    search = p.add_argument_group("genetic search (for the policy that searches)")
    backend = p.add_argument_group("backend")
    output = p.add_argument_group("output")
    model.add_argument("--model", default="small-cnn",
                   help="small-cnn, small-lstm, or a zoo model: wresnet-D-X, inception-X, nasnet-R, "
                        "rnn-L-XK, brnn-L-XK, resnet-D, gpt-tiny, gpt2-small|medium|large|xl, gpt-7b, "
                        "gpt-L-W-H, or the folder of an imported PyTorch model (python -m engine.importer) "
                        "(default: small-cnn)")
    model.add_argument("--batch", type=positive_int, default=None, help="batch size (default: the model's own)")
    model.add_argument("--size", type=positive_int, default=None,
                   help="image side for CNNs, sequence length for RNNs and GPTs (default: the model's own)")
    model.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="tensor dtype")
    model.add_argument("--data", metavar="FILE.npz",
                   help="train on these arrays instead of synthetic data: an npz whose members are named as "
                        "the model's inputs and labels, each [samples, ...the input's shape after the batch], "
                        "in its dtype (a mismatch is refused and names what the model wants)")
    training.add_argument("--iterations", type=positive_int, default=150, help="training iterations (default 150)")
    training.add_argument("--seed", type=seed, default=0, help="seed of the initial weights and the data (default 0)")
    training.add_argument("--optimizer", choices=OPTIMIZERS, default=None,
                   help="sgd (with momentum), adam, or adamw (decoupled weight decay); default: the model's "
                        "own (adamw for gpt models, sgd otherwise)")
    training.add_argument("--lr", type=positive_float, default=None,
                   help="learning rate (default: 0.05 for sgd, 1e-3 for adam and adamw)")
    training.add_argument("--momentum", type=nonnegative_float, default=0.9, help="SGD momentum (default 0.9)")
    training.add_argument("--weight-decay", type=nonnegative_float, default=1e-4, help="weight decay (default 1e-4)")
    training.add_argument("--checkpoint", metavar="FILE", help="save parameters and optimizer state here (npz)")
    training.add_argument("--checkpoint-every", type=positive_int, default=None, metavar="N",
                   help="with --checkpoint: save every N iterations, and always at exit (default 50)")
    training.add_argument("--resume", metavar="FILE", help="continue from this checkpoint, bit-identically")
    training.add_argument("--save-weights", metavar="FILE",
                   help="write the trained parameters here: FILE.safetensors (PyTorch, Hugging Face) or FILE.npz")
    memory.add_argument("--memory", metavar="SIZE", type=size, default=None,
                   help="device memory budget, for the tensor pool and operator scratch in one arena, in "
                        "binary units (e.g. 64MiB, 16GiB); default: 0.3 of the unlimited-memory peak, or "
                        "the smallest budget that runs, grown where a policy on an online allocator "
                        "(window, lms, smartswap) finds no room there until it plans")
    memory.add_argument("--policy", type=policies, default=list(policies_registry.DEFAULT_NAMES), metavar="P[,P...]",
                   help=_policy_help())
    memory.add_argument("--allocator", choices=allocator_names(), default=None,
                   help=_allocator_help())
    memory.add_argument("--chunk-mib", type=mebibytes, default=None, metavar="MIB",
                   help="with --allocator va (or auto): the physical chunk size in MiB (default for the online "
                        "policies: the largest power of two at most a sixteenth of the pool, at most 20 as "
                        "nnabla and PyTorch, paper 001 used 40 MB; 2 for swapadvisor; on CUDA a multiple of "
                        "the allocation granularity, 2)")
    memory.add_argument("--window", type=window, default=None, metavar="SIZE|auto",
                   help="with --policy window: paper 001's look-ahead window in bytes (e.g. 2GiB), or auto: the "
                        "fastest on the simulator among sizes from 1/64 to 2 times the pool and the whole sequence "
                        "(default auto)")
    memory.add_argument("--swap-only", action="store_true",
                   help="the searched planner without recomputation (tensors only move between device and "
                        "host): the ablation of keep, swap or recompute")
    memory.add_argument("--measure-iterations", type=positive_int, default=15, metavar="N",
                   help="timed iterations for each policy but the last; their median is its s/iter "
                        "(default 15: fewer swing with the machine's load)")
    backend.add_argument("--backend", choices=("auto", *backend_registry.names()), default="auto",
                   help=_backend_help())
    backend.add_argument("--device", type=nonnegative_int, default=0, metavar="N",
                   help="CUDA device number for the cuda backend (default 0)")
    memory.add_argument("--profile", metavar="DEVICE|FILE",
                   help="profile driving the planner and simulator: a device name (v100, h100) for an "
                        "analytic one, or a profile JSON file; default: measured on the backend that runs "
                        "(v100 with --simulate-only)")
    memory.add_argument("--save-profile", metavar="FILE",
                   help="write the profile used (measured or analytic) as JSON, for --profile FILE later")
    search.add_argument("--search-seconds", type=seconds, default=10.0, metavar="S",
                   help="genetic search for the swapadvisor policy: seconds to search schedules and "
                        "allocations (default 10; 0: no search, the default order and a simple allocation)")
    search.add_argument("--search-generations", type=positive_int, default=None, metavar="N",
                   help="stop the search after N generations (with or without --search-seconds)")
    search.add_argument("--population", type=positive_int, default=144, help="search population (default 144)")
    search.add_argument("--workers", type=positive_int, default=None,
                   help="search worker processes (default: all cores; with --ray-address: Ray actors, "
                        "default every CPU of the cluster)")
    search.add_argument("--ray-address", metavar="ADDRESS", default=None,
                   help="evaluate the search's candidates on Ray (pip install \".[ray]\"): 'local' starts "
                        "Ray here, 'auto' joins the cluster 'ray start --head' started, or ray://HOST:PORT; "
                        "every node needs this package installed. Same plan for a seed as on local processes")
    search.add_argument("--search-checkpoint", metavar="FILE",
                   help="save the search's population here every generation; with --resume-search, "
                        "continue from it")
    search.add_argument("--resume-search", action="store_true", help="continue the search from --search-checkpoint")
    search.add_argument("--save-plan", metavar="FILE", help="also save the swapadvisor Program (JSON) here")
    search.add_argument("--load-plan", metavar="FILE",
                   help="run this saved swapadvisor Program instead of planning (it is verified first)")
    memory.add_argument("--simulate-only", action="store_true",
                   help="plan and simulate without executing (graphs of any size, no data allocated, "
                        "no backend)")
    backend.add_argument("--link-gbps", type=positive_float, default=None,
                   help=f"emulated host-device link of the cpu backend, GB/s one way (default "
                        f"{backend_registry.DEFAULT_LINK_GBPS:g}; both ways together get 1.6x that); not for the cuda backend, "
                        "whose link is real")
    backend.add_argument("--sanitize", action="store_true",
                   help="poison memory about to be overwritten and add random delays to every stream "
                        "(catches races; on cuda, no CUDA graphs)")
    training.add_argument("--no-check", action="store_true",
                   help="skip comparing the trained parameters with an unlimited-memory run on the same "
                        "backend")
    output.add_argument("--out", metavar="DIR",
                   help="the run's folder: plan.json, trace.json, steps.jsonl (default: a new runs/<model>/<UTC "
                        "time>/ for each run); a folder that holds a run is refused without --overwrite")
    output.add_argument("--overwrite", action="store_true", help="replace the run that --out DIR holds")
    output.add_argument("--json", metavar="FILE", help="also write the report's figures to this JSON file")
    output.add_argument("--quiet", action="store_true", help="no progress bar")
    return p
