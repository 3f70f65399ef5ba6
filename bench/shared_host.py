"""Simulated study (issue 41): N data-parallel ranks on one host, each a V100 (analytic profile,
12 GB/s each way of its own) under 16 GiB, their copies together bound by the host
(``--host-gbps``); per-rank throughput as a fraction of the one-rank plan, for a plan made as if
each rank had the host to itself and one made on its share (``Profile.shared``), both timed
under the shared host. swapadvisor in its default order, no search (the search's fitness is the
same simulator, so it would see the share too; "aware" keeps the faster of the two plans under
the shared host, as its fitness would); the all-reduce is left out (a network of the
profile's; planner/allreduce.py), so the figures isolate the host.

    python -m bench.shared_host [--host-gbps 32] [--models wresnet-152-10:64,gpt2-xl:8] [--save]
"""
from __future__ import annotations

import argparse
import time
from dataclasses import replace

import zoo
from engine.profile import HostShare, analytic_profile
from engine.library.planning import plan
from planner.facts import GraphFacts
from planner.policy import get
from planner.simulate import simulate

from .results_file import planning_machine_line, save_results

BUDGET = 16 * 2**30
RANKS = (1, 2, 4, 8)


def study(model: str, batch: int, host_bps: float) -> list[str]:
    g = zoo.build(model, batch=batch)
    facts = GraphFacts(g)
    v100 = analytic_profile("v100")
    policy = get("swapadvisor")
    t0 = time.process_time()
    alone = plan(g, policy, v100, BUDGET, facts=facts).program
    base = simulate(alone, g, v100).total
    rows = []
    for n in RANKS:
        shared = replace(v100, host=HostShare(n, host_bps))
        oblivious = simulate(alone, g, shared).total
        on_share = simulate(plan(g, policy, shared.shared(), BUDGET, facts=facts).program, g, shared).total
        aware = min(on_share, oblivious)       # the faster under the shared host, as a search's fitness picks
        rows.append(f"{model:>16} {batch:>5} {n:>5} {shared.rank_link.h2d_bytes_per_s / 1e9:>9.1f} "
                    f"{base / oblivious:>10.3f} {base / on_share:>10.3f} {base / aware:>10.3f} "
                    f"{oblivious / aware:>9.3f}")
    rows.append(f"{'':>16} planned in {time.process_time() - t0:.0f} s CPU; peak {facts.peak_bytes / 2**30:.1f} GiB, "
                f"one rank alone {base:.3f} s per iteration")
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host-gbps", type=float, default=32.0)
    p.add_argument("--models", default="wresnet-152-10:64,gpt2-xl:8")
    p.add_argument("--save", action="store_true")
    a = p.parse_args(argv)
    lines = [f"bench.shared_host: ranks of one host, V100 analytic (12 GB/s each way per device), 16 GiB per rank, "
             f"host bound {a.host_gbps:g} GB/s for all ranks' copies together (an assumption, see below)",
             planning_machine_line(),
             "per-rank throughput as a fraction of the one-rank plan alone; both plans timed under the shared host",
             "oblivious: planned as if each rank had the host to itself; on share: planned on its share of the host "
             "(Profile.shared); aware: the faster of the two under the shared host (what a search's fitness, the same "
             "simulator, would keep); aware win: oblivious time / aware time",
             f"the host bound is an assumption for this study, not a measured or cited figure",
             f"{'model':>16} {'batch':>5} {'ranks':>5} {'GB/s/rank':>9} {'oblivious':>10} {'on share':>10} "
             f"{'aware':>10} {'aware win':>9}"]
    for spec in a.models.split(","):
        model, batch = spec.split(":")
        lines += study(model, int(batch), a.host_gbps * 1e9)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.save:
        print(f"saved to {save_results('shared_host', text)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
