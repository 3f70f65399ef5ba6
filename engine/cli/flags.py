"""The flags of `python -m engine.train`, and how a bad one is reported.

Kept apart from the orchestration (engine/cli/run.py) so the whole command line can be
read in one place. The flags the four commands share are built by engine/cli/common_flags.py
(one help, one default); the value types are engine/cli/flag_types.py's, each refusing a bad
value with argparse's error, which becomes a :class:`FlagError`: one line on stderr, exit
status 2. Policies and backends are listed from their registries (``planner.policy``,
``engine.backend_registry``).
"""
from __future__ import annotations

import argparse

from allocator.registry import names as allocator_names
from planner import policy as policies_registry

from ..errors import UsageError  # noqa: F401  (defined in engine.errors; the command line raises it)
from . import common_flags as shared
from .flag_types import mebibytes, nonnegative_float, positive_int, window

PROG = "engine.train"


def _allocator_help() -> str:
    from allocator.registry import REGISTRY
    listed = "; ".join(f"{a.name}: {a.summary}" for a in REGISTRY.values())
    return (f"how the policies place tensors ({listed}); a policy that cannot use it is refused "
            f"(default: each policy's own)")


def parser() -> argparse.ArgumentParser:
    p = shared.command_parser(PROG, "Train a model on synthetic data (or your own: --data) and report throughput.")
    p.add_argument("--config", metavar="FILE",
                   help="take the settings from this JSON file: a report --json wrote (its \"settings\"), or an "
                        "object of those keys; flags given beside it win")
    model = p.add_argument_group("model and data")
    training = p.add_argument_group("training")
    memory = p.add_argument_group("memory and policies")
    search = p.add_argument_group("genetic search (for the policy that searches)")
    backend = p.add_argument_group("backend")
    output = p.add_argument_group("output")
    shared.add_model(model, shared.TRAINING)
    shared.add_batch(model)
    shared.add_size(model)
    model.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="tensor dtype")
    model.add_argument("--data", metavar="FILE.npz",
                   help="train on these arrays instead of synthetic data: an npz whose members are named as "
                        "the model's inputs and labels, each [samples, ...the input's shape after the batch], "
                        "in its dtype (a mismatch is refused and names what the model wants)")
    shared.add_iterations(training)
    shared.add_seed(training)
    shared.add_optimizer(training)
    shared.add_lr(training)
    training.add_argument("--momentum", type=nonnegative_float, default=0.9, help="SGD momentum (default 0.9)")
    training.add_argument("--weight-decay", type=nonnegative_float, default=1e-4, help="weight decay (default 1e-4)")
    training.add_argument("--checkpoint", metavar="FILE", help="save parameters and optimizer state here (npz)")
    training.add_argument("--checkpoint-every", type=positive_int, default=None, metavar="N",
                   help="with --checkpoint: save every N iterations, and always at exit (default 50)")
    training.add_argument("--resume", metavar="FILE", help="continue from this checkpoint, bit-identically")
    training.add_argument("--save-weights", metavar="FILE",
                   help="write the trained parameters here: FILE.safetensors (PyTorch, Hugging Face) or FILE.npz")
    training.add_argument("--no-check", action="store_true",
                   help="skip comparing the trained parameters with an unlimited-memory run on the same "
                        "backend")
    shared.add_memory(memory, "0.3 of the unlimited-memory peak, or the smallest budget that runs, grown where a "
                              "policy on an online allocator (window, lms, smartswap) finds no room there until "
                              "it plans")
    shared.add_policy(memory, list(policies_registry.DEFAULT_NAMES), several=True,
                      which="; several, comma-separated, are compared: the last one trains for --iterations, the "
                            "others are timed on --measure-iterations")
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
    shared.add_profile(memory)
    memory.add_argument("--save-profile", metavar="FILE",
                   help="write the profile used (measured or analytic) as JSON, for --profile FILE later")
    shared.add_simulate_only(memory)
    shared.add_search_seconds(search, 10.0)
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
    shared.add_backend(backend)
    backend.add_argument("--ranks", type=positive_int, default=1, metavar="N",
                   help="data-parallel training on N Ray actors (a local Ray, or --ray-address's cluster), each on "
                        "its shard of --batch, gradients added in rank order: the bits of one rank accumulating N "
                        "micro-batches (default 1: this process alone)")
    output.add_argument("--out", metavar="DIR",
                   help="the run's folder: plan.json, trace.json, steps.jsonl (default: a new runs/<model>/<UTC "
                        "time>/ for each run); a folder that holds a run is refused without --overwrite")
    output.add_argument("--overwrite", action="store_true", help="replace the run that --out DIR holds")
    shared.add_json(output)
    output.add_argument("--quiet", action="store_true", help="no progress bar")
    return p
