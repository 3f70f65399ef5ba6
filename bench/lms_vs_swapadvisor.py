"""SwapAdvisor's Figure 7, simulated: WResNet-152-4 at batch 16, 32 and 64 under 16 GiB on the
analytic V100 profile (PCIe, the SwapAdvisor paper's machine): ``lms`` (TFLMS: activations
only, parameters resident, thresholds tuned on the simulator, bestfit) beside ``swapadvisor``
(its planner with the size-class pool: unsearched, and with ``--search-seconds`` a genetic search
of that many seconds per batch) and ``odswap``; ``ideal`` for reference (its peak need not fit).

Images per second of one simulated iteration; every Program is verified. The paper's bars
(as its text layer gives them) are printed beside ours. ``cell`` also makes TFLMS as published
(``tflms``, and ``tflms v2``), which bench.papers' Figure 7 prints beside lms.

    python -m bench.lms_vs_swapadvisor [--batches 16,32,64] [--search-seconds 60] [--save]
"""
from __future__ import annotations

import argparse
import time

from tabulate import tabulate

import zoo
from bench.results_file import Transcript, planning_machine_line, save_results
from engine.errors import EngineError
from engine.profile import analytic_profile
from planner import policy
from planner.budget import Budget, make_budget
from planner.facts import GraphFacts
from planner.simulate import simulate
from planner.verify import verify

MODEL = "wresnet-152-4"
BATCHES = (16, 32, 64)
DEVICE_BYTES = 16 * 2**30
# TFLMS's columns, each a policy and its options: tuned on the simulator (lms), as published
# (tflms: v1, the paper's; v2: TFLMSv2's first defaults); bestfit (TensorFlow's BFC), whole device.
ONLINE_COLUMNS = {"lms": ("lms", {}), "tflms": ("tflms", {}), "tflms v2": ("tflms", {"version": "v2"})}
# SwapAdvisor Figure 7 (images/s), read from the paper's text layer in bar order.
PAPER = {"SwapAdvisor": (15.2, 15.0, 14.3), "ODSwap": (14.2, 14.0, 11.5), "TFLMS": (4.74, 4.34, 3.72)}


def searched_swapadvisor(g, facts, budget, profile, secs, seconds: float, workers: int):
    from ga.search import SearchOptions, search

    pol = policy.get("swapadvisor")
    result = search(facts, budget, profile, SearchOptions(population=24, time_limit_s=seconds, workers=workers,
                                                         progress=False),
                    pol)
    return pol.make(result.request(g, facts, budget, profile, secs))


def column_seconds(c: str, g, facts, profile, secs, search_seconds: float = 0.0, workers: int = 2,
                   device_bytes: int = DEVICE_BYTES) -> float:
    """Simulated seconds of one column's verified Program (EngineError where it cannot run)."""
    if c == "ideal":
        program, budget = policy.get("ideal").make(policy.PlanRequest(g, facts, None, profile, secs)), None
    elif c in ONLINE_COLUMNS:
        budget = Budget(device_bytes, facts.scratch.bytes)
        name, options = ONLINE_COLUMNS[c]
        program = policy.get(name).make(policy.PlanRequest(g, facts, budget, profile, secs, allocator="bestfit",
                                                           policy_options=options))
    elif c == "swapadvisor searched":
        budget = make_budget(facts, device_bytes)
        program = searched_swapadvisor(g, facts, budget, profile, secs, search_seconds, workers)
    else:
        budget = make_budget(facts, device_bytes)
        program = policy.get(c).make(policy.PlanRequest(g, facts, budget, profile, secs, allocator="pool"))
    verify(program, g, None if budget is None else budget.device_bytes)
    return simulate(program, g, profile, secs).total


def cell(c: str, batch: int, model: str = MODEL, device_bytes: int = DEVICE_BYTES) -> tuple[float | None, str]:
    """(images/s or None, why not) of one unsearched column at one batch, as the table prints it."""
    g = zoo.build(model, batch=batch)
    profile = analytic_profile("v100")
    try:
        return batch / column_seconds(c, g, GraphFacts(g), profile, profile.node_seconds(g),
                                      device_bytes=device_bytes), ""
    except EngineError as e:
        return None, str(e)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--search-seconds", type=float, default=0.0, help="a GA search per batch (0: unsearched only)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--save", action="store_true", help="write bench/results/lms_vs_swapadvisor_<date>.txt")
    args = ap.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    profile = analytic_profile("v100")
    say = Transcript()

    say(f"SwapAdvisor Figure 7, simulated: {MODEL}, 16 GiB, analytic profile v100 (PCIe: 12 GB/s each way, "
        f"20 GB/s both ways)")
    say(planning_machine_line())
    say("lms: thresholds tuned on the simulator (planner.policies.lms.tune), bestfit; swapadvisor: unsearched "
        "(default order, simple allocation)" + (f"; searched: the GA, population 24, {args.search_seconds:g} s per "
                                                f"batch on {args.workers} workers" if args.search_seconds else ""))
    columns = ["ideal", "lms", "odswap", "swapadvisor"] + (["swapadvisor searched"] if args.search_seconds else [])
    ips = {c: [] for c in columns}
    notes = []
    for b in batches:
        g = zoo.build(MODEL, batch=b)
        facts = GraphFacts(g)
        secs = profile.node_seconds(g)
        state = sum(g.tensors[c].nbytes for c, _ in g.state_pairs)
        say(f"batch {b}: unlimited peak {facts.peak_bytes / 2**30:.1f} GiB, parameters and optimizer state "
            f"{state / 2**30:.2f} GiB")
        for c in columns:
            t0 = time.perf_counter()
            try:
                ips[c].append(b / column_seconds(c, g, facts, profile, secs, args.search_seconds, args.workers))
            except EngineError as e:
                ips[c].append(None)
                notes.append(f"batch {b} {c}: x ({e})")
            v = ips[c][-1]
            print(f"  {c}: {'x' if v is None else f'{v:.2f} ips'} ({time.perf_counter() - t0:.1f} s)", flush=True)
    fmt = (lambda v: "x" if v is None else f"{v:.2f}")
    rows = [[f"ours: {c}", *map(fmt, ips[c])] for c in columns]
    if batches == list(BATCHES):
        rows += [[f"paper: {k}", *map(fmt, v)] for k, v in PAPER.items()]
    say()
    say(tabulate(rows, headers=["images/s", *(f"B={b}" for b in batches)], tablefmt="github"))
    say()
    for c in columns[2:]:
        say(f"{c} / lms: " + "  ".join(
            f"B={b}: {'n/a' if s is None or m is None else f'{s / m:.2f}x'}"
            for b, s, m in zip(batches, ips[c], ips["lms"])))
    say("paper: SwapAdvisor / TFLMS >= 3x at every batch (3.2x, 3.5x, 3.8x)")
    if notes:
        say()
        for n in notes:
            say(f"  {n}")
    if args.save:
        print(f"saved {save_results('lms_vs_swapadvisor', say.text())}")


if __name__ == "__main__":
    main()
