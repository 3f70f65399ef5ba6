"""SwapAdvisor Table 2: ResNet-152 inference under tight memory, seconds per batch.

Budgets 64, 128, 192, 512, 640 MiB and batches 1, 16, 64, planned by the swapadvisor policy
after --search-seconds of its genetic search per cell (0: default order and the simple
allocation) with the weights as persistent state (engine.ir), verified, and:

- simulated on the analytic V100 profile (224x224 images, the paper's setting), each cell's
  overhead against the unlimited-memory (ideal) plan, the paper's cells beside ours, and each
  cell's lower bound (``planner.bounds``: no plan of that order under that budget is faster);
- the same Programs simulated on "v100+dispatch": the V100 profile with a per-operator dispatch
  cost set so that the unlimited batch-1 time equals the paper's measured 0.017 s (the analytic
  profile knows no kernel latency, so its batch-1 compute is 3.5x the paper's speed and every
  swapping overhead looks 3.5x larger than on the paper's GPU); a sensitivity check, not a
  measurement;
- measured on the CPU backend (emulated link, one BLAS thread), with a profile measured on this
  machine (each cell also gives its Program's time simulated on that profile, "sim"), every
  batch's outputs compared bit for bit with the unlimited-memory numpy reference:
  - batch 1 at the paper's balance: the paper's 224x224 input and budgets, the emulated link
    slowed by the factor by which this machine's full-memory batch is slower than the paper's
    V100 (0.017 s), so that copies take the share of a batch they took there;
  - every batch on smaller images (--cpu-size) over the default 2 GB/s link, at the same
    budgets as fractions of the unlimited peak of the 224x224 model.

"N/A" where the budget is below the smallest that runs.

    python -m bench.table2 [--search-seconds 20] [--cpu-size 64] [--cpu-batches 3] [--no-cpu | --only-cpu]
                           [--no-scaled | --only-scaled] [--save]
"""
from __future__ import annotations

import argparse
import datetime
import statistics
import sys
from dataclasses import replace

from tabulate import tabulate

from bench.results_file import cpu_name, save_results
from engine.backend_registry import choose
from engine.blas_threads import one_blas_thread
from engine.library.inference import (executor_run, forward_graph, plan_inference, same_outputs,
                                      unlimited_outputs)
from engine.library.planning import plan_bounds
from engine.profile import analytic_profile
from planner.budget import make_budget
from planner.facts import GraphFacts
from planner.simulate import simulate

BUDGETS_MIB = (64, 128, 192, 512, 640)
BATCHES = (1, 16, 64)
# Table 2 of the paper (seconds per batch; None: N/A).
PAPER = {1: (0.024, 0.022, 0.018, 0.017, 0.017),
         16: (None, 0.077, 0.044, 0.040, 0.040),
         64: (None, None, None, 0.238, 0.123)}
PAPER_FULL_BATCH1 = 0.017
PAPER_LINK_GBPS = 12.0      # the paper's PCIe link, one way (our analytic v100 profile's)


def cell(seconds, full) -> str:
    if seconds is None:
        return "N/A"
    return f"{seconds:.4f} ({seconds / full:.2f}x)"


def paper_cell(batch: int, i: int) -> str:
    s = PAPER[batch][i]
    return "N/A" if s is None else f"{s:.3f} ({s / PAPER[batch][-1]:.2f}x)"


def dispatch_profile(base):
    """``base`` with a per-operator dispatch cost that makes batch 1's unlimited time the paper's."""
    g = forward_graph("resnet-152", 1)
    full = plan_inference(g, None, profile=base).seconds
    per_op = (PAPER_FULL_BATCH1 - full) / len(g.nodes)
    return replace(base, dispatch_s=base.dispatch_s + per_op), per_op


def simulated_rows(profile, calibrated, search_seconds: float) -> tuple[list, list, list]:
    """Rows on ``profile`` (planned and searched there), the same Programs on ``calibrated``, and
    each budget's lower bound on ``profile`` (``planner.bounds``, for the Program's order)."""
    rows, again, bounds = [], [], []
    for batch in BATCHES:
        g = forward_graph("resnet-152", batch)
        facts = GraphFacts(g)
        secs = calibrated.node_seconds(g)
        plans = [plan_inference(g, None, profile=profile).plan]
        plans += [plan_inference(g, mib * 2**20, profile=profile, search_seconds=search_seconds).plan
                  for mib in BUDGETS_MIB]
        least = [plans[0].seconds] + [
            plan_bounds(p.program, facts, make_budget(facts, mib * 2**20), profile).bound
            if p else None for p, mib in zip(plans[1:], BUDGETS_MIB)]
        for out, seconds in ((rows, [p.seconds if p else None for p in plans]),
                             (again, [simulate(p.program, g, calibrated, secs).total if p else None for p in plans]),
                             (bounds, least)):
            out.append([batch, f"{seconds[0]:.4f}"] + [cell(s, seconds[0]) for s in seconds[1:]])
        print(tabulate([rows[-1]]), file=sys.stderr, flush=True)
    return rows, again, bounds


def measured_rows(size: int, batches: int, search_seconds: float) -> list:
    """CPU backend: budgets as fractions of the 224x224 model's unlimited peak."""
    placement = choose("cpu")
    return [measured_row(placement, batch, size, batches, search_seconds) for batch in BATCHES]


def measured_row(placement, batch: int, size: int, batches: int, search_seconds: float) -> list:
    """One batch size's row on ``placement``: the full-memory time, then each budget's (as the
    paper's budget's fraction of the 224x224 model's unlimited peak) with its overhead, and
    whether every budget's outputs equal the unlimited run's bit for bit."""
    fractions = [mib * 2**20 / GraphFacts(forward_graph("resnet-152", batch)).peak_bytes for mib in BUDGETS_MIB]
    g = forward_graph("resnet-152", batch, size)
    facts = GraphFacts(g)
    ideal = plan_inference(g, None).plan.program
    profile = placement.kind.measure_profile(placement, g, ideal, 0, None)
    reference = unlimited_outputs(g, placement, batches + 1)
    plans = [plan_inference(g, None, profile=profile)]
    plans += [plan_inference(g, int(f * facts.peak_bytes), profile=profile, search_seconds=search_seconds)
              for f in fractions]
    times = run_side_by_side(g, [p.plan.program if p.plan else None for p in plans], placement, batches)
    same = {i: same_outputs(outs, reference) for i, (_, outs) in times.items()}
    full = times[0][0]
    row = [batch, f"{full:.3f} (sim {plans[0].seconds:.3f})"]
    for i, f in enumerate(fractions, start=1):
        text = f"{f:.2f}: " + ("N/A" if i not in times else
                               f"{times[i][0]:.3f} ({times[i][0] / full:.2f}x; sim {plans[i].seconds:.3f})"
                               f"{'' if same[i] else ' DIFFERS'}")
        row.append(text)
    row.append("yes" if all(same.values()) else "NO")
    print(tabulate([row]), file=sys.stderr, flush=True)
    return row


def run_side_by_side(g, programs, placement, batches: int) -> dict:
    """{index: (median seconds per batch, outputs of every batch)} of each Program that is not
    None, ``batches`` + 1 batches each. Every Program's batch i runs before any batch i + 1, so
    the shared machine's slow moments fall on all of them alike; the first batch warms up."""
    runs, backends = {}, []
    try:
        for i, program in enumerate(programs):
            if program is not None:
                runs[i], be = executor_run(g, program, placement)
                backends.append(be)
        outs = {i: [] for i in runs}
        for _ in range(batches + 1):
            for i, run in runs.items():
                outs[i].append(run.batch())
    finally:
        for be in backends:
            be.close()
    return {i: (statistics.median(run.seconds[1:]), outs[i]) for i, run in runs.items()}


def paper_scaled_link_gbps(batches: int) -> tuple[float, float]:
    """(link GB/s, full-memory seconds): the paper's 12 GB/s link slowed by the factor by which this
    machine's full-memory batch 1 (224x224, the paper's input) is slower than the paper's 0.017 s,
    so that copies take the same share of a batch as on the paper's V100."""
    placement = choose("cpu")
    g = forward_graph("resnet-152", 1)
    full = run_side_by_side(g, [plan_inference(g, None).plan.program], placement, batches)[0][0]
    return PAPER_LINK_GBPS * PAPER_FULL_BATCH1 / full, full


def scaled_table(args, budgets) -> list[str]:
    gbps, full = paper_scaled_link_gbps(args.cpu_batches)
    row = measured_row(choose("cpu", link_gbps=gbps), 1, 224, args.cpu_batches, args.cpu_search_seconds)
    return [f"Ours, measured on the CPU backend at the paper's balance: batch 1 at the paper's 224x224 input and "
            f"budgets, the emulated link slowed by the factor by which this machine's full-memory batch is slower "
            f"than the paper's V100 ({full:.3f} s, measured first, against {PAPER_FULL_BATCH1} s: "
            f"{PAPER_LINK_GBPS:g} GB/s becomes {gbps:.3f} GB/s), so that copies take the share of a batch they "
            f"took on the paper's machine; one BLAS thread, median of {args.cpu_batches} batches after a warm-up, "
            "the budgets' batches interleaved, the machine shared with other jobs:",
            tabulate([row], headers=["batch", "full", *budgets, "outputs = unlimited"], disable_numparse=True), ""]


def measured_table(args, budgets) -> list[str]:
    rows = measured_rows(args.cpu_size, args.cpu_batches, args.cpu_search_seconds)
    return [f"Ours, measured on the CPU backend ({cpu_name()}, emulated 2 GB/s link, one BLAS thread, "
            f"{args.cpu_size}x{args.cpu_size} images; median of {args.cpu_batches} batches after a warm-up, "
            "the budgets' batches interleaved; the machine was shared with other jobs). Each budget is the "
            "paper's as a fraction of the 224x224 model's unlimited peak, applied to this model's peak:",
            tabulate(rows, headers=["batch", "full", *budgets, "outputs = unlimited"], disable_numparse=True), ""]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--search-seconds", type=float, default=20.0, help="genetic search per cell (0: none)")
    ap.add_argument("--cpu-search-seconds", type=float, default=5.0, help="genetic search per CPU cell")
    ap.add_argument("--cpu-size", type=int, default=64, help="image side for the CPU backend's runs (at 32, batch 1 leaves batch norm one value per channel)")
    ap.add_argument("--cpu-batches", type=int, default=3, help="timed batches per CPU cell (after one warm-up)")
    ap.add_argument("--no-cpu", action="store_true", help="only the simulated tables")
    ap.add_argument("--only-cpu", action="store_true", help="only the measured tables")
    ap.add_argument("--no-scaled", action="store_true", help="skip the CPU batch-1 row at the paper's balance")
    ap.add_argument("--only-scaled", action="store_true", help="of the CPU tables, only that row")
    ap.add_argument("--save", action="store_true", help="write bench/results/table2_<date>.txt")
    args = ap.parse_args(argv)
    budgets = [f"{m} MiB" for m in BUDGETS_MIB]
    out = [f"SwapAdvisor Table 2: ResNet-152 inference, seconds per batch (x: overhead against full memory), "
           f"{datetime.date.today().isoformat()}, {cpu_name()}",
           f"policy swapadvisor after {args.search_seconds:g} s of genetic search per cell (one worker; "
           f"{args.cpu_search_seconds:g} s for the CPU cells), weights as persistent state",
           ""]
    paper = [[b, f"{PAPER[b][-1]:.3f}"] + [paper_cell(b, i) for i in range(len(BUDGETS_MIB))] for b in BATCHES]
    out += ["Paper (V100, MXNet; full memory taken as the 640 MB cell):",
            tabulate(paper, headers=["batch", "full", *budgets], disable_numparse=True), ""]
    if not args.only_cpu:
        v100 = analytic_profile("v100")
        calibrated, per_op = dispatch_profile(v100)
        rows, again, bounds = simulated_rows(v100, calibrated, args.search_seconds)
        out += ["Ours, simulated on the analytic V100 profile (12 GB/s link), 224x224:",
                tabulate(rows, headers=["batch", "full", *budgets], disable_numparse=True), "",
                "Lower bounds on the same profile (planner.bounds, for each Program's order and budget: no plan "
                "is faster):",
                tabulate(bounds, headers=["batch", "full", *budgets], disable_numparse=True), "",
                f"The same Programs simulated on v100+dispatch ({per_op * 1e6:.1f} us per operator, so that batch 1 "
                f"at full memory takes the paper's {PAPER_FULL_BATCH1} s; a sensitivity check, not a measurement):",
                tabulate(again, headers=["batch", "full", *budgets], disable_numparse=True), ""]
    if not args.no_cpu:
        with one_blas_thread():
            if not args.no_scaled:
                out += scaled_table(args, budgets)
            if not args.only_scaled:
                out += measured_table(args, budgets)
    text = "\n".join(out)
    print(text)
    if args.save:
        print(f"saved {save_results('table2', text)}", file=sys.stderr)


if __name__ == "__main__":
    main()
