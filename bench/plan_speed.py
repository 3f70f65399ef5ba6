"""Plan-plus-simulate time per candidate at the paper's scale (graphs only, no data).

For each Table 1 model: build the training graph, then time the SwapAdvisor
planner (default order, simple allocation, 16 GiB) and the simulator on the
analytic V100 profile, as the genetic search does for every candidate.

    python -m bench.plan_speed [--repeats 2] [--models ...]
"""
from __future__ import annotations

import argparse
import time

from tabulate import tabulate

import zoo
from engine.profile import analytic_profile
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT
from planner.allocation import simple_allocation
from planner.budget import make_budget
from planner.facts import GraphFacts
from planner.simulate import simulate
from planner.swap_planner import plan

MODELS = {   # the paper's Table 1 configurations (zoo/stats.py uses the same)
    "wresnet-152-10": 64, "inception-4": 64, "nasnet-25": 64, "rnn-8-8k": 256, "brnn-4-8k": 128,
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--budget-gib", type=float, default=16)
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args(argv)
    profile = analytic_profile("v100")
    device_bytes = int(args.budget_gib * 2**30)
    rows = []
    for name in args.models.split(","):
        t0 = time.perf_counter()
        g = zoo.build(name, batch=MODELS[name])
        built = time.perf_counter() - t0
        secs = profile.node_seconds(g)
        facts = GraphFacts(g)
        budget = make_budget(facts, device_bytes)
        order = facts.order
        alloc = simple_allocation(facts, budget)
        plan_s, sim_s = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            program = plan(g, order, alloc, budget.scratch_bytes, profile, secs)
            t1 = time.perf_counter()
            timeline = simulate(program, g, profile, secs)
            plan_s.append(t1 - t0)
            sim_s.append(time.perf_counter() - t1)
        rows.append([name, len(g.nodes), f"{built:.1f}", program.count(COMPUTE), program.count(SWAP_IN),
                     program.count(SWAP_OUT), f"{min(plan_s):.2f}", f"{min(sim_s):.2f}",
                     f"{min(plan_s) + min(sim_s):.2f}", f"{timeline.total:.2f}"])
        print(tabulate([rows[-1]], disable_numparse=True), flush=True)
    print(tabulate(rows, headers=["model", "nodes", "build s", "compute", "swap-in", "swap-out", "plan s",
                                  "simulate s", "per candidate s", "sim s/iter"], disable_numparse=True))


if __name__ == "__main__":
    main()
