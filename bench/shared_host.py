"""Simulated study (issue 41): N data-parallel ranks on one host, each a V100 (analytic profile,
12 GB/s each way of its own) under 16 GiB, on the host of NVIDIA's DGX-1 with V100: per-rank
throughput as a fraction of the one-rank plan, for a plan made as if each rank had the host to
itself and one made on its share (``Profile.shared``), both timed under the shared host.
swapadvisor in its default order, no search (the search's fitness is the same simulator, so it
would see the share too; "aware" keeps the faster of the two plans under the shared host, as its
fitness would); the all-reduce is left out (a network of the profile's; planner/allreduce.py), so
the figures isolate the host.

The host (``HOST``, cited): NVIDIA's "NVIDIA DGX-1 With Tesla V100 System Architecture" white paper
(WP-08437-002, 2017; its section "DGX-1 NVLink Network Topology for Efficient Application Scaling",
as reproduced at https://www.iitr.ac.in/dgx): "V100 also supports 16 lanes of PCIe 3.0. In DGX-1,
these are used for connecting between the CPUs and GPUs and high-speed IB network interface cards."
Its system diagram puts the eight GPUs two to a PCIe switch, each switch joined to a CPU by one x16
Gen3 link (16 GB/s theoretical each way, about 12 measured: the same 12 GB/s as the V100 profile's
own link), so ranks 2k and 2k+1 share one uplink: ``HostShare.group``. Host memory: two Xeon
E5-2698 v4 with DDR4-2133 (NVIDIA's DGX-1 forum thread,
https://forums.developer.nvidia.com/t/nvidia-dgx-1-the-fastest-deep-learning-system/148508: "DGX-1
has 512GB DDR4-2133"), four channels a socket (Intel's figure for that CPU), 2 x 4 x 2133e6 x 8 B =
136.5 GB/s theoretical for all ranks together; the four uplinks (48 GB/s) bind long before it.
``--host-gbps`` and ``--uplink-gbps`` put other figures in their place.

    python -m bench.shared_host [--host-gbps 136.5] [--uplink-gbps 12] [--models wresnet-152-10:64,gpt2-xl:8]
                                [--search-evaluations N [--seed S]] [--save]
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

from .recompute_table import search_options
from .results_file import planning_machine_line, save_results

BUDGET = 16 * 2**30
RANKS = (1, 2, 4, 8)
# DGX-1 (V100): GPUs two to a PCIe switch, its x16 Gen3 uplink about 12 GB/s each way measured (16
# theoretical); host memory 2 sockets x 4 channels of DDR4-2133 (see the docstring's sources).
PER_SWITCH = 2
UPLINK_GBPS = 12.0
HOST_GBPS = 2 * 4 * 2133e6 * 8 / 1e9


def study(model: str, batch: int, host_bps: float, uplink_bps: float, evaluations: int = 0, seed: int = 0
          ) -> list[str]:
    g = zoo.build(model, batch=batch)
    facts = GraphFacts(g)
    v100 = analytic_profile("v100")
    policy = get("swapadvisor")
    t0 = time.process_time()
    alone = plan(g, policy, v100, BUDGET, facts=facts).program
    base = simulate(alone, g, v100).total
    search = search_options(0, evaluations, seed) if evaluations else None
    # Searched: the oblivious plan's fitness is the simulator without the host, the aware one's
    # with it (the search times copies on the rank's share); one search per distinct share.
    searched_alone = plan(g, policy, v100, BUDGET, facts=facts, search=search).program if search else None
    searched_on: dict = {}
    rows = []
    for n in RANKS:
        shared = replace(v100, host=HostShare(n, host_bps, PER_SWITCH, uplink_bps))
        oblivious = simulate(alone, g, shared).total
        on_share = simulate(plan(g, policy, shared.shared(), BUDGET, facts=facts).program, g, shared).total
        aware = min(on_share, oblivious)       # the faster under the shared host, as a search's fitness picks
        row = (f"{model:>16} {batch:>5} {n:>5} {shared.rank_link.h2d_bytes_per_s / 1e9:>9.1f} "
               f"{base / oblivious:>10.3f} {base / on_share:>10.3f} {base / aware:>10.3f} {oblivious / aware:>9.3f}")
        if search:
            share = shared.rank_link
            if share not in searched_on:
                searched_on[share] = plan(g, policy, shared, BUDGET, facts=facts, search=search).program
            s_oblivious = simulate(searched_alone, g, shared).total
            s_aware = simulate(searched_on[share], g, shared).total
            row += f" {base / s_oblivious:>10.3f} {base / s_aware:>10.3f} {s_oblivious / s_aware:>9.3f}"
        rows.append(row)
    rows.append(f"{'':>16} planned in {time.process_time() - t0:.0f} s CPU; peak {facts.peak_bytes / 2**30:.1f} GiB, "
                f"one rank alone {base:.3f} s per iteration")
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host-gbps", type=float, default=HOST_GBPS, help="host memory, all ranks together")
    p.add_argument("--uplink-gbps", type=float, default=UPLINK_GBPS,
                   help=f"each PCIe switch's uplink, each way, shared by its {PER_SWITCH} ranks")
    p.add_argument("--models", default="wresnet-152-10:64,gpt2-xl:8")
    p.add_argument("--search-evaluations", type=int, default=0,
                   help="also search each plan this many evaluations (one worker per core) and add its columns")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save", action="store_true")
    a = p.parse_args(argv)
    lines = [f"bench.shared_host: ranks of one DGX-1 (V100) host, V100 analytic (12 GB/s each way per device), 16 GiB "
             f"per rank; ranks two to a PCIe switch sharing its x16 Gen3 uplink, {a.uplink_gbps:g} GB/s each way, "
             f"within host memory's {a.host_gbps:.1f} GB/s for all ranks together; ranks fill the switches in "
             "order (0 and 1 share one)",
             "sources: NVIDIA, NVIDIA DGX-1 With Tesla V100 System Architecture, white paper WP-08437-002 (2017): "
             "V100's 16 lanes of PCIe 3.0 connect CPUs and GPUs, two GPUs to a PCIe switch (its system diagram); "
             "host memory DDR4-2133, 2 sockets x 4 channels (NVIDIA developer forum, DGX-1 thread; Intel, Xeon "
             "E5-2698 v4): see bench/shared_host.py",
             planning_machine_line(),
             "per-rank throughput as a fraction of the one-rank plan alone; both plans timed under the shared host",
             "oblivious: planned as if each rank had the host to itself; on share: planned on its share of the host "
             "(Profile.shared); aware: the faster of the two under the shared host (what a search's fitness, the same "
             "simulator, would keep); aware win: oblivious time / aware time",
             f"{'model':>16} {'batch':>5} {'ranks':>5} {'GB/s/rank':>9} {'oblivious':>10} {'on share':>10} "
             f"{'aware':>10} {'aware win':>9}"
             + (f" {'s. obliv.':>10} {'s. aware':>10} {'s. win':>9}" if a.search_evaluations else "")]
    if a.search_evaluations:
        lines.insert(-1, f"searched (s.): each plan after a genetic search of {a.search_evaluations} evaluations "
                         f"(seed {a.seed}): the oblivious one's fitness the simulator without the host, the aware "
                         "one's under the shared host; both timed under the shared host")
    for spec in a.models.split(","):
        model, batch = spec.split(":")
        lines += study(model, int(batch), a.host_gbps * 1e9, a.uplink_gbps * 1e9, a.search_evaluations, a.seed)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.save:
        print(f"saved to {save_results('shared_host', text)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
