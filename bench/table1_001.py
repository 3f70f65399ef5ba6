"""Paper 001's Table 1, simulated: ResNet-50 (``wresnet-50-1``), 224x224, growing batch, 16 GiB, on
the analytic V100-NVLink profile (``v100-nvlink``: 50 GB/s each way, 100 GB/s both ways).

Images per second of one simulated iteration for: in memory (``ideal``, where its peak and the
operator scratch fit 16 GiB), ``lms`` (TFLMS, thresholds tuned on the simulator, bestfit),
``window`` with ``bestfit`` and with ``va`` (window size searched on the simulator), and
SwapAdvisor's planner with its size-class pool (``swapadvisor``, unsearched: the default order
and the simple allocation). "x" where a configuration cannot run (the reason is listed below
the table). Every Program is verified against the budget before it is simulated. The paper's
figures (its Table 1: P100 rows for LMS, V100 rows for its own) are printed beside ours.

The online allocators are bounded by the pool (16 GiB less the operator scratch) and plan or
fail on their own; the size-class pool keeps ``make_budget``'s refusal (its smallest allocation),
which is why ``swapadvisor`` can be "x" where ``window`` runs.

    python -m bench.table1_001 [--batches 64,128] [--chunk-mib 40] [--save]
"""
from __future__ import annotations

import argparse
import time

from tabulate import tabulate

import zoo
from allocator.registry import takes_option
from bench.results_file import Transcript, planning_machine_line, save_results
from engine.errors import EngineError
from engine.profile import analytic_profile
from planner import policy
from planner.budget import Budget, make_budget
from planner.facts import GraphFacts
from planner.simulate import simulate
from planner.verify import verify

BATCHES = (64, 128, 190, 256, 512, 928, 1120, 1248, 1440)
DEVICE_BYTES = 16 * 2**30
# Paper 001 Table 1 (images/s); None is its "x".
PAPER = {
    "LMS baseline (P100)": (235, 255, 258, None, None, None, None, None, None),
    "LMS (Le et al., P100)": (235, 255, 241, 236, 209, 137, None, None, None),
    "baseline (V100)": (336, 492, 581, None, None, None, None, None, None),
    "schedule (V100)": (320, 439, 533, 559, 457, 400, None, None, None),
    "schedule + VA (V100)": (304, 389, 415, 424, 446, 409, 398, 347, 321),
}
COLUMNS = ("ideal", "lms", "window+bestfit", "window+va", "swapadvisor")


def run_one(column: str, g, facts: GraphFacts, profile, secs, chunk_bytes: int, device_bytes: int = DEVICE_BYTES):
    """(seconds or None, note) for one column at one batch (``device_bytes``: 16 GiB, 001's V100)."""
    if column == "ideal":
        need = facts.peak_bytes + facts.scratch.bytes
        if need > device_bytes:
            return None, f"peak {need / 2**30:.1f} GiB > {device_bytes / 2**30:g} GiB"
        program = policy.get("ideal").make(policy.PlanRequest(g, facts, None, profile, secs))
        verify(program, g, None)
        return simulate(program, g, profile, secs).total, ""
    if column == "swapadvisor":
        budget = make_budget(facts, device_bytes)
        program = policy.get("swapadvisor").make(policy.PlanRequest(g, facts, budget, profile, secs,
                                                                   allocator="pool"))
    else:
        name, _, alloc = column.partition("+")
        alloc = alloc or "bestfit"
        options = {"chunk_bytes": chunk_bytes} if takes_option(alloc, "chunk_bytes") else {}
        budget = Budget(device_bytes, facts.scratch.bytes)
        program = policy.get(name).make(policy.PlanRequest(g, facts, budget, profile, secs, allocator=alloc,
                                                           allocator_options=options))
    verify(program, g, device_bytes)
    return simulate(program, g, profile, secs).total, ""


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--chunk-mib", type=int, default=40, help="va's physical chunk (001 used 40 MB)")
    ap.add_argument("--save", action="store_true", help="write bench/results/table1_001_<date>.txt")
    args = ap.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    profile = analytic_profile("v100-nvlink")
    say = Transcript()

    say(f"paper 001 Table 1, simulated: wresnet-50-1 224x224, 16 GiB, profile v100-nvlink (V100 rates; link "
        f"50 GB/s each way, 100 GB/s both ways), va chunk {args.chunk_mib} MiB")
    say(planning_machine_line())
    say("ideal: in memory, where its peak fits; lms: thresholds tuned on the simulator (planner.policies.lms.tune); "
        "window: window size searched on the simulator (--window auto); swapadvisor: unsearched (default order, "
        "simple allocation, size-class pool); every Program verified against 16 GiB")
    ips = {c: [] for c in COLUMNS}
    notes = []
    for b in batches:
        g = zoo.build("wresnet-50-1", batch=b, size=224)
        facts = GraphFacts(g)
        secs = profile.node_seconds(g)
        for c in COLUMNS:
            t0 = time.perf_counter()
            try:
                seconds, note = run_one(c, g, facts, profile, secs, args.chunk_mib << 20)
            except EngineError as e:
                seconds, note = None, str(e)
            ips[c].append(None if seconds is None else b / seconds)
            if note:
                notes.append(f"batch {b} {c}: x ({note})")
            print(f"  batch {b} {c}: {'x' if seconds is None else f'{b / seconds:.0f} ips'} "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)
    fmt = (lambda v: "x" if v is None else f"{v:.0f}")
    rows = [[f"ours: {c}", *map(fmt, ips[c])] for c in COLUMNS]
    rows += [[f"paper: {k}", *map(fmt, v)] for k, v in PAPER.items() if len(v) == len(BATCHES)] \
        if batches == list(BATCHES) else []
    say()
    say(tabulate(rows, headers=["images/s", *map(str, batches)], tablefmt="github"))
    best_in_memory = max((v for v in ips["ideal"] if v is not None), default=None)
    if best_in_memory:
        say()
        say(f"best in-memory: {best_in_memory:.0f} ips; as a fraction of it:")
        for c in COLUMNS[1:]:
            say(f"  {c:15s} " + "  ".join(f"{b}: {'x' if v is None else f'{v / best_in_memory:.2f}'}"
                                           for b, v in zip(batches, ips[c])))
        say("  paper schedule+VA at 1440: 321 ips, 0.55 of its in-memory best (581)")
    if notes:
        say()
        say("why each x:")
        for n in notes:
            say(f"  {n}")
    if args.save:
        print(f"saved {save_results('table1_001', say.text())}")


if __name__ == "__main__":
    main()
