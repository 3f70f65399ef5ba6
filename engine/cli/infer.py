"""Inference under a memory budget: ``python -m engine.infer`` (SwapAdvisor Section 6.3).

A forward-only graph (``resnet-D``; its logits are the graph's output) is planned under each
budget with its weights as persistent state (``engine.ir``: a weight nothing updates is its
own next value, resident across batches when it fits, streamed in with overlap when it does
not, never copied back), verified, simulated on the profile, and, unless --simulate-only,
run for --batches batches on the backend; every batch's outputs are compared bit for bit
with the unlimited-memory run's.

    python -m engine.infer --model resnet-152 --batch 1 --memory 64MiB,640MiB --simulate-only
    python -m engine.infer --model resnet-50 --batch 2 --size 64 --memory 50%,100% --backend cpu

The flags it shares with the other commands are engine/cli/common_flags.py's.

The pieces (``plan_inference``, ``InferenceRun``) live in engine/library/inference.py.
"""
from __future__ import annotations

import argparse
from fractions import Fraction

import numpy as np

from planner import policy as policies_registry
from planner.facts import GraphFacts

from ..backend_registry import choose
from ..data import TeacherData
from ..errors import UsageError
from ..ir import PERSISTENT_KINDS
from ..library.inference import (PlannedInference, executor_run, forward_graph, plan_inference,  # noqa: F401
                                 same_outputs, unlimited_outputs)
from ..library.models import batch_of
from ..library.planning import plan_bounds, profile_of
from ..units import checked_size, format_bytes, parse_bytes
from . import common_flags as shared
from .command import namespace_settings, run_command
from .flag_types import positive_int
from .plans import describe_profile, profile_source, resolve_profile
from .preflight import check_names
from .report_json import JsonReport

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
BATCHES = 3                 # --batches' default (None when not given, so that --simulate-only can refuse it)
TABLE2_BUDGETS = "64MiB,128MiB,192MiB,512MiB,640MiB"     # SwapAdvisor's Table 2, for ResNet-152 at batch 1


def parser() -> argparse.ArgumentParser:
    p = shared.command_parser(PROG, "Plan a forward-only model under memory budgets with its weights as persistent "
                                    "state, simulate it, and run batches bit-identically to unlimited memory.")
    shared.add_model(p, shared.inference_models(shared.INFERENCE_TABLE2))
    shared.add_batch(p)
    shared.add_size(p)
    shared.add_memory(p, f"{TABLE2_BUDGETS}, SwapAdvisor's Table 2 budgets for ResNet-152", several=True,
                      default=TABLE2_BUDGETS)
    shared.add_policy(p, "swapadvisor", which="; it plans every budget")
    shared.add_search_seconds(p, 0.0, ": engine.infer searches once per budget")
    shared.add_profile(p)
    shared.add_simulate_only(p)
    p.add_argument("--batches", type=positive_int, default=None, help=f"batches run per budget (default {BATCHES})")
    shared.add_backend(p)
    shared.add_seed(p)
    shared.add_json(p)
    return p


def run(args, report: JsonReport | None = None) -> int:
    report = report or JsonReport([], None, PROG)
    check_names((("--profile", args.profile),))     # '' read as not given: the default, silently
    if not policies_registry.get(args.policy).runs_program:      # each budget said N/A, exit 0
        runs = ", ".join(p.name for p in policies_registry.REGISTRY.values() if p.runs_program)
        raise UsageError(f"--policy {args.policy} runs no Program, so it plans no budget; choose from {runs}")
    if args.simulate_only:          # these only change the batches run, and none runs
        given = next((flag for flag, v in (("--batches", args.batches), ("--link-gbps", args.link_gbps),
                                           ("--sanitize", args.sanitize or None)) if v is not None), None)
        if given:
            raise UsageError(f"{given} is about the batches run, which --simulate-only does not run; drop one of them")
    args.batches = args.batches or BATCHES
    g = forward_graph(args.model, args.batch, args.size)      # the model's own batch: one request (zoo)
    batch = batch_of(g)
    facts = GraphFacts(g)
    budgets = [budget_bytes(s, facts.peak_bytes) for s in args.memory.split(",") if s.strip()]
    if not budgets:
        raise UsageError("--memory names no budget; e.g. --memory 64MiB,50%")
    profile = profile_of(args.profile) if args.profile else None      # a bad file: refused before the run prints
    placement = None if args.simulate_only else choose(args.backend, args.device, args.link_gbps)
    weights = sum(g.tensors[t].nbytes for t in g.leaves(*PERSISTENT_KINDS))
    report.update(model=g.name, batch=batch, peak_bytes=facts.peak_bytes, persistent_bytes=weights,
                  smallest_budget_bytes=facts.smallest_budget,
                  **(placement.kind.to_json(placement, "") if placement else {"backend": None}))
    if placement:
        print(placement.announcement())
    print(f"{g.name}, batch {batch}: unlimited peak {format_bytes(facts.peak_bytes)}, persistent "
          f"{format_bytes(weights)}, smallest budget {format_bytes(facts.smallest_budget)}")
    profile = profile or resolve_profile(None, placement, g, args.seed, TeacherData(g, args.seed, samples=4 * batch),
                                         facts=facts)
    source = profile_source(args.profile, profile)
    print(f"profile {describe_profile(source, 's/batch')}")
    full = plan_inference(g, None, profile=profile)
    print(f"  unlimited (ideal): {full.seconds:.4f} s/batch simulated, {format_bytes(full.plan.h2d_bytes)} in per "
          "batch")
    rows: list[dict] = []
    report.update(profile=source, unlimited={"sim_s": full.seconds, "h2d_bytes": full.plan.h2d_bytes}, budgets=rows)
    reference = unlimited_outputs(g, placement, args.batches, args.seed) if placement else None
    all_same = True
    for b in budgets:
        pi = plan_inference(g, b, args.policy, profile, args.search_seconds, args.seed)
        if pi.plan is None:
            print(f"  {format_bytes(b):>10}: N/A ({pi.why})")
            rows.append({"budget_bytes": b, "sim_s": None, "why": pi.why})
            continue
        bounds = plan_bounds(pi.plan.program, facts, pi.plan.budget, profile)
        row = {"budget_bytes": b, "sim_s": pi.seconds, "x_unlimited": pi.seconds / full.seconds,
               "x_bound": pi.seconds / bounds.recompute_bound, "x_swap_bound": pi.seconds / bounds.bound,
               "h2d_bytes": pi.plan.h2d_bytes, "d2h_bytes": pi.plan.d2h_bytes}
        line = (f"  {format_bytes(b):>10}: {pi.seconds:.4f} s/batch simulated ({row['x_unlimited']:.2f}x "
                f"unlimited, {row['x_bound']:.2f}x its lower bound, {row['x_swap_bound']:.2f}x swapping only), "
                f"{format_bytes(pi.plan.h2d_bytes)} in, {format_bytes(pi.plan.d2h_bytes)} out")
        if placement:
            runner, backend = executor_run(g, pi.plan.program, placement, args.sanitize, args.seed)
            try:
                outs = [runner.batch() for _ in range(args.batches)]
            finally:
                backend.close()
            same = same_outputs(outs, reference)
            all_same &= same
            row.update(batches=args.batches, real_s=float(np.median(runner.seconds)), identical=same)
            line += (f"; ran {args.batches} batches on {placement.kind.name}, {row['real_s']:.4f} s/batch, "
                     f"outputs identical to the unlimited run: {'yes' if same else 'NO'}")
        rows.append(row)
        print(line)
    report.update(identical=all_same if placement else None)
    return 0 if all_same else 1


def main(argv=None) -> int:
    return run_command(PROG, argv, lambda words: namespace_settings(parser().parse_args(words)), run)
