"""Inference under a memory budget: ``python -m engine.infer`` (SwapAdvisor Section 6.3).

A forward-only graph (``resnet-D``; its logits are the graph's output) is planned under each
budget with its weights as persistent state (``engine.ir``: a weight nothing updates is its
own next value, resident across batches when it fits, streamed in with overlap when it does
not, never copied back), verified, simulated on the profile, and, unless --simulate-only,
run for --batches batches on the backend; every batch's outputs are compared bit for bit
with the unlimited-memory run's.

    python -m engine.infer --model resnet-152 --batch 1 --memory 64MiB,640MiB --simulate-only
    python -m engine.infer --model resnet-50 --batch 2 --size 64 --memory 50%,100% --backend cpu

The pieces (``plan_inference``, ``InferenceRun``) live in engine/library/inference.py.
"""
from __future__ import annotations

import argparse
import sys
from fractions import Fraction

import numpy as np

from engine import api
from planner import policy as policies_registry
from planner.facts import GraphFacts

from .. import backend_registry
from ..backend_registry import choose
from ..errors import EngineError
from ..ir import PERSISTENT_KINDS
from ..library.inference import (PlannedInference, executor_run, forward_graph, plan_inference,  # noqa: F401
                                 same_outputs, unlimited_outputs)
from ..library.imported import is_model_folder
from ..library.models import batch_of
from ..library.planning import plan_bounds
from ..units import checked_size, format_bytes, parse_bytes
from .flags import UsageError, _DefaultsShown, _Parser, positive_float, positive_int, seconds, seed

PROG = "engine.infer"


def budget_bytes(spec: str, peak: int) -> int:
    """A budget given as a size (64MiB) or as a percentage of the unlimited peak (50%)."""
    text = spec.strip()
    if text.endswith("%"):
        try:                    # exact: 'inf%' and '1e400%' are refused, not an OverflowError
            fraction = Fraction(text[:-1].strip()) / 100
        except (ValueError, ZeroDivisionError):
            raise UsageError(f"--memory {spec}: '{text[:-1]}' is not a number; give a finite percentage "
                             "such as 50%") from None
        if not fraction > 0:
            raise UsageError(f"--memory {spec}: a percentage must be above 0")
        try:
            return checked_size(int(fraction * peak), text)
        except ValueError as e:
            raise UsageError(f"--memory {spec}: {e}") from None
    if text.replace(".", "", 1).isdigit():
        raise UsageError(f"--memory {spec}: no unit; write e.g. {text}MiB, or {text}% of the unlimited peak")
    try:
        return parse_bytes(text)
    except ValueError as e:
        raise UsageError(f"--memory {spec}: {e}") from None



# ---------------------------------------------------------------------------- command line
def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=f"python -m {PROG}", allow_abbrev=False, formatter_class=_DefaultsShown,
                description="Plan a forward-only model under memory budgets with its weights as persistent "
                            "state, simulate it, and run batches bit-identically to unlimited memory.")
    p.add_argument("--model", default="resnet-152", help="a forward-only zoo model: resnet-D")
    p.add_argument("--batch", type=positive_int, default=None,
                   help="requests per batch (default 1; an imported model's: the export's)")
    p.add_argument("--size", type=positive_int, default=None, help="image side (default: the model's own, 224)")
    p.add_argument("--memory", default="64MiB,128MiB,192MiB,512MiB,640MiB", metavar="SIZE[,SIZE...]",
                   help="device budgets: sizes with a binary unit, or percentages of the unlimited peak (50%%)")
    p.add_argument("--policy", default="swapadvisor", help="the swap policy for the budgets")
    p.add_argument("--search-seconds", type=seconds, default=0.0, metavar="S",
                   help="genetic search per budget before planning (the policy that searches; 0: default order "
                        "and the simple allocation)")
    p.add_argument("--profile", default="v100", metavar="DEVICE|FILE",
                   help="profile for planning and simulating: v100, h100, or a profile JSON file")
    p.add_argument("--simulate-only", action="store_true", help="plan and simulate; run nothing")
    p.add_argument("--backend", choices=("auto", *backend_registry.names()), default="cpu",
                   help="where batches run: cpu, cuda or auto")
    p.add_argument("--link-gbps", type=positive_float, default=None, help="the cpu backend's emulated link, GB/s")
    p.add_argument("--batches", type=positive_int, default=None, help="batches run per budget (default 3)")
    p.add_argument("--sanitize", action="store_true", help="poison freed memory and jitter streams (cpu backend)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the weights and the requests")
    return p


BATCHES = 3                 # --batches' default


def run(args) -> int:
    if args.policy not in api.policies():
        raise UsageError(f"--policy {args.policy}: unknown; choose from {', '.join(api.policies())}")
    if not policies_registry.get(args.policy).runs_program:      # each budget said N/A, exit 0
        runs = ", ".join(p.name for p in policies_registry.REGISTRY.values() if p.runs_program)
        raise UsageError(f"--policy {args.policy} runs no Program, so it plans no budget; choose from {runs}")
    if args.simulate_only:          # these only change the batches run, and none runs
        given = next((flag for flag, v in (("--batches", args.batches), ("--link-gbps", args.link_gbps),
                                           ("--sanitize", args.sanitize or None)) if v is not None), None)
        if given:
            raise UsageError(f"{given} is about the batches run, which --simulate-only does not run; drop one of them")
    args.batches = args.batches or BATCHES
    if args.batch is None and not is_model_folder(args.model):
        args.batch = 1
    g = forward_graph(args.model, args.batch, args.size)
    if args.batch is None:
        args.batch = batch_of(g)
    facts = GraphFacts(g)
    budgets = [budget_bytes(s, facts.peak_bytes) for s in args.memory.split(",") if s.strip()]
    if not budgets:
        raise UsageError("--memory names no budget; e.g. --memory 64MiB,50%")
    profile = api.profile(args.profile)
    placement = None if args.simulate_only else choose(args.backend, 0, args.link_gbps)
    weights = sum(g.tensors[t].nbytes for t in g.leaves(*PERSISTENT_KINDS))
    print(f"{g.name}, batch {args.batch}: unlimited peak {format_bytes(facts.peak_bytes)}, persistent "
          f"{format_bytes(weights)}, smallest budget {format_bytes(facts.smallest_budget)}")
    full = plan_inference(g, None, profile=profile)
    print(f"  unlimited (ideal): {full.seconds:.4f} s/batch simulated on {args.profile}, "
          f"{format_bytes(full.plan.h2d_bytes)} in per batch")
    reference = unlimited_outputs(g, placement, args.batches, args.seed) if placement else None
    all_same = True
    for b in budgets:
        pi = plan_inference(g, b, args.policy, profile, args.search_seconds, args.seed)
        if pi.plan is None:
            print(f"  {format_bytes(b):>10}: N/A ({pi.why})")
            continue
        bounds = plan_bounds(pi.plan.program, facts, pi.plan.budget, profile)
        line = (f"  {format_bytes(b):>10}: {pi.seconds:.4f} s/batch simulated ({pi.seconds / full.seconds:.2f}x "
                f"unlimited, {pi.seconds / bounds.recompute_bound:.2f}x its lower bound, "
                f"{pi.seconds / bounds.bound:.2f}x swapping only), {format_bytes(pi.plan.h2d_bytes)} in, "
                f"{format_bytes(pi.plan.d2h_bytes)} out")
        if placement:
            runner, backend = executor_run(g, pi.plan.program, placement, args.sanitize, args.seed)
            try:
                outs = [runner.batch() for _ in range(args.batches)]
            finally:
                backend.close()
            same = same_outputs(outs, reference)
            all_same &= same
            line += (f"; ran {args.batches} batches on {placement.kind.name}, {np.median(runner.seconds):.4f} s/batch, "
                     f"outputs identical to the unlimited run: {'yes' if same else 'NO'}")
        print(line)
    return 0 if all_same else 1


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return run(parser().parse_args(argv))
    except EngineError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
