"""A measured 2-rank CPU run beside the simulator's figure for it (issue 41).

Two ranks on a local Ray train ``--model`` at ``--batch`` (each rank its half) on the cpu backend
(emulated link ``--link-gbps``) under swapadvisor's plan at the default budget, the gradients
all-reduced by the Program's own instructions on its fourth stream (``RankSpec.in_program``:
gloo all-gather and rank-order sum, the exact mode). Each step is timed on the driver (the wall
time of one ``step`` call to both ranks, the median over ``--steps`` after one warm-up) and on the
ranks (their wall and CPU seconds, and the seconds inside the Program).

The simulator's figures: the rank's Program, its all-reduces included, simulated on two profiles.
Apart: measured before the ranks start, the one the plan is made on: each operator's time, the
per-instruction cost and the emulated link from engine.cpu_profiling on the rank's graph (in two
Ray workers at once, as the two ranks share the machine when they train), and the ``network``
fitted (latency and bandwidth) to the exact reduction timed on the same Ray at a few sizes
(bench.ranks_reduce's ``Reducer``). As the ranks train (the prediction the target is checked
on): ``PROFILING_STEPS`` steps after the warm-up with every instruction timed on each rank
(``RankTrainer.instruction_timings``), from which each operator's mean seconds, the link fitted
to the copies' mean seconds and the network's latency to the all-reduces' (their wait for the
other rank counted), as SwapAdvisor profiles each operator on the device it will run on; the
timed steps come after them. On two cores two ranks, their copy and all-reduce threads and Ray
slow each operator, copy and all-reduce against the same work measured apart (the profile
apart predicts 1.3-2x too fast), which only a profile taken under that load sees. Around the
Program a step has two costs no Program instruction stands for, measured apart and added to the
simulated step, each in its own line: Ray's round trip of one call to every rank (an empty call,
``clock``), and the rank's host work outside the Program (loading its state into the executor
and reading it back, drawing its shard: the rank's step wall minus its Program wall). The
output gives the load average before and after the timing (engine.timing_trust) and the ratios.

    python -m bench.ranks_measured [--model small-cnn] [--batch 32] [--size 32] [--steps 15] [--quick] [--save]
    python -m bench.ranks_measured --ranks 1 --batch 16 [--save]    # the control: one rank on the same shard
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import replace

import numpy as np

from engine.backends.cpu import EmulatedLink
from engine.cpu_profiling import measure_cpu_profile
from engine.library.ranks import RankSpec, plan_ranks, whole_graph
from engine.library.ray_ranks import connect, start_ranks
from engine.profile import Link, Network, Profile
from engine.profiling import fit_copies
from engine.program import ALLREDUCE, COMPUTE, SWAP_IN, SWAP_OUT
from engine.timing_trust import HostLoad, busy_warning, load_average, spread
from planner.facts import GraphFacts
from planner.policy import unlimited_program
from planner.simulate import simulate

from .ranks_reduce import Reducer
from .results_file import cpu_name, save_results

WORLD = 2
TARGET = 0.20                               # issue 41: within 20%
# The exact reduction timed at these bytes: around the buckets of a small model's gradients (small-cnn's
# are 21 KiB in all), where its latency, not its bandwidth, decides.
NETWORK_SIZES = (2**10, 2**12, 2**14, 2**16, 2**18)
# Steps after the warm-up with every operator timed on the ranks: the profile measured as they train.
PROFILING_STEPS = 3


def network_of(ray, world: int, repeats: int) -> Network:
    """The exact reduction's cost over ``world`` ranks on this Ray, as a ring's ``Network``: the
    all-gather and rank-order sum of B bytes takes a + B/r (from the medians at NETWORK_SIZES); a
    ring takes 2(N-1) latencies and 2(N-1)/N of B over its bandwidth."""
    remote = ray.remote(num_cpus=1)(Reducer)
    actors = [remote.remote(world, r, f"network-{os.getpid()}") for r in range(world)]
    try:
        timed = [(n, ray.get([x.run.remote(n, repeats) for x in actors])[0]["exact"][0]) for n in NETWORK_SIZES]
    finally:
        for x in actors:
            ray.kill(x)
    (small, t_small), (big0, t0), (big, t1) = timed[0], timed[-2], timed[-1]
    # the bandwidth from the two largest sizes, the latency from the smallest (a least-squares line
    # through all of them let one noisy large size push its intercept, the latency, below zero)
    rate = (big - big0) / (t1 - t0) if t1 > t0 else big / t1
    latency = max(t_small - small / rate, 0.0)
    steps = 2 * (world - 1)
    return Network(bytes_per_s=rate * steps / world, latency_s=latency / steps)


def measured_profile(spec: RankSpec, network: Network | None) -> Profile:
    """The rank's graph's profile on this machine, with the network between the ranks: measured
    in ``spec.world`` Ray workers at once, as the ranks run (they share the machine's cores and
    memory), rank 0's kept."""
    import ray

    measure = ray.remote(num_cpus=1)(one_profile)
    return ray.get([measure.remote(spec, network) for _ in range(spec.world)])[0]


def one_profile(spec: RankSpec, network: Network | None) -> Profile:
    """The rank's graph's profile measured in this process, with ``network``."""
    g = whole_graph(spec)
    rate = spec.link_gbps * 1e9
    profile = measure_cpu_profile(g, unlimited_program(g, GraphFacts(g)), EmulatedLink(rate, rate, 1.6 * rate),
                                  spec.seed)
    return replace(profile, network=network)


def timed_steps(spec: RankSpec, plans, steps: int, profiling_steps: int = PROFILING_STEPS) -> dict:
    """Train ``steps`` steps after one warm-up and ``profiling_steps`` steps with every instruction
    timed on the ranks; each timed step's driver wall time, the ranks' own times, each rank's
    instruction timings of the profiling steps, and the round trip of an empty call to every rank."""
    ranks = start_ranks(spec, plans)
    try:
        ranks.call("timed_step")                         # warm-up: first replay, caches
        profiled = [ranks.call("instruction_timings") for _ in range(profiling_steps)]
        walls, on_ranks = [], []
        for _ in range(steps):
            t0 = time.perf_counter()
            on_ranks.append(ranks.call("timed_step"))
            walls.append(time.perf_counter() - t0)
        calls = []
        for _ in range(max(steps, 10)):
            t0 = time.perf_counter()
            ranks.call("clock")
            calls.append(time.perf_counter() - t0)
    finally:
        ranks.close()

    def median(key: str) -> float:                      # the slower rank's median: the step waits for it
        return max(statistics.median(step[r][key] for step in on_ranks) for r in range(spec.world))

    share = min(statistics.median(step[r]["cpu"] / step[r]["wall"] for step in on_ranks) for r in range(spec.world))
    return {"walls": walls, "rank_wall": median("wall"), "rank_cpu": median("cpu"), "program": median("program"),
            "call": statistics.median(calls), "share": share,
            "timings": [[step[r] for step in profiled] for r in range(spec.world)]}


def profile_as_trained(profile: Profile, program, g, timings: list[list[tuple]], world: int
                       ) -> tuple[Profile, np.ndarray]:
    """One rank's profile from its own profiling steps (``timings``: per step, the backend's
    (stream, what, start, end) per instruction), as (Profile, seconds per node): each operator's
    mean seconds; the link fitted to the mean copy of each size each way (the duplex rate scaled
    with them); the network's latency refitted so that the ring's mean cost over the buckets is
    the all-reduces' mean seconds (the bandwidth kept from the network measured apart: the
    buckets of a small model are too small to fit it), which counts the wait for the other rank.
    Means, not medians: a step's time is their sum, and the slow tail of each is in it."""
    ran: dict[int, list[float]] = {}
    copies: dict[int, list[tuple[int, float]]] = {SWAP_IN: [], SWAP_OUT: []}
    reduces: list[float] = []
    for step in timings:
        for stream, what, t0, t1 in step:
            if stream == COMPUTE:
                ran.setdefault(what, []).append(t1 - t0)
            elif stream in copies:
                copies[stream].append((what, t1 - t0))
            elif stream == ALLREDUCE:
                reduces.append(t1 - t0)
    seconds = profile.node_seconds(g)
    for node, runs in ran.items():
        seconds[node] = statistics.fmean(runs)
    link = profile.link
    (lat_in, rate_in), (lat_out, rate_out) = (fit_copies(copies[k], statistics.fmean) for k in (SWAP_IN, SWAP_OUT))
    duplex = link.duplex_bytes_per_s * min(rate_in / link.h2d_bytes_per_s, rate_out / link.d2h_bytes_per_s)
    measured = replace(profile, link=Link(rate_in, rate_out, duplex, (lat_in + lat_out) / 2))
    network = profile.network
    if network is not None and reduces:
        buckets = [sum(g.tensors[t].nbytes for t in ins.bucket) for ins in program.instrs if ins.kind == ALLREDUCE]
        hops = 2 * (world - 1)
        by_bandwidth = statistics.fmean(hops / world * b / network.bytes_per_s for b in buckets)
        latency = max((statistics.fmean(reduces) - by_bandwidth) / hops, 0.0)
        measured = replace(measured, network=Network(network.bytes_per_s, latency))
    return measured, seconds


def simulated_as_trained(profile: Profile, program, g, timings: list[list[list[tuple]]], world: int
                         ) -> tuple[float, Profile]:
    """The Program simulated on each rank's profile measured as it trained: the slower rank's
    seconds (every all-reduce waits for it) and its profile."""
    runs = []
    for rank_timings in timings:
        measured, seconds = profile_as_trained(profile, program, g, rank_timings, world)
        runs.append((simulate(program, g, measured, seconds).total, measured))
    return max(runs, key=lambda run: run[0])


def run(model: str, batch: int, size: int | None, steps: int, link_gbps: float, repeats: int,
        policy: str | None = "swapadvisor", world: int = WORLD) -> tuple[list[str], dict]:
    """The report's lines and its figures (for the quick mode's test)."""
    ray = connect("local", WORLD)
    network = network_of(ray, world, repeats) if world > 1 else None     # one rank reduces nothing
    spec = RankSpec(model, batch, world, size=size, policy=policy, backend="cpu", link_gbps=link_gbps,
                    in_program=True)
    profile = measured_profile(spec, network)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "profile.json")
        profile.save(path)
        spec = replace(spec, profile=path)
        plans = plan_ranks(spec)
        (program,) = plans.programs
        simulated = plans.seconds[0]
        g = whole_graph(spec)
        before = load_average()
        m = timed_steps(spec, plans, steps)
        load = HostLoad.now(before)
    trained, as_trained = simulated_as_trained(profile, program, g, m["timings"], world)
    wall = statistics.median(m["walls"])
    outside = m["rank_wall"] - m["program"]
    predicted = trained + outside + m["call"]
    apart = simulated + outside + m["call"]
    figures = {"simulated": simulated, "trained": trained, "program": m["program"], "rank_wall": m["rank_wall"],
               "outside": outside, "call": m["call"], "predicted": predicted, "predicted_apart": apart, "wall": wall,
               "cpu": m["rank_cpu"], "share": m["share"], "program_ratio": m["program"] / trained,
               "step_ratio": wall / predicted, "step_ratio_apart": wall / apart}
    grads = sum(g.tensors[t].nbytes for ins in program.instrs if ins.kind == ALLREDUCE for t in ins.bucket)

    def link_and_network(p: Profile) -> str:
        return (f"link {p.link.h2d_bytes_per_s / 1e9:.2f} GB/s in, {p.link.d2h_bytes_per_s / 1e9:.2f} out, latency "
                f"{p.link.latency_s * 1e6:.0f} us; "
                + (f"network {p.network.bytes_per_s / 1e9:.2f} GB/s, latency {p.network.latency_s * 1e6:.0f} us a hop"
                   if p.network else "no network (one rank)"))

    row = "{:<66} {:>9.4f}".format
    lines = [
        f"model {model} at batch {batch} ({spec.shard} per rank){f', size {size}' if size else ''}: "
        + (f"{policy} under {plans.device_bytes / 2**20:.2f} MiB per rank" if policy else "unlimited memory")
        + f", {len(program.instrs)} instructions, "
        f"{program.bytes_moved(g, SWAP_IN) / 2**20:.2f} MiB swapped in, {program.count(ALLREDUCE)} all-reduce(s) "
        f"of {grads / 2**10:.1f} KiB of gradients in all",
        f"profile measured apart ({world} worker(s) at once, as many as the ranks; the plan is made on it): "
        f"{len(profile.ops)} operator signatures, dispatch {profile.dispatch_s * 1e6:.1f} us per instruction, emulated "
        f"{link_and_network(profile)}" + (" (the network: the exact reduction on this Ray, fitted)" if network else ""),
        f"profile measured as the ranks train ({PROFILING_STEPS} steps after the warm-up, every instruction timed on "
        f"each rank, the slower rank's): each operator's mean seconds, {link_and_network(as_trained)} (fitted to the "
        "copies' mean seconds" + ("; the network's latency to the all-reduces', which count the wait for the other "
                                  "rank)" if network else ")"),
        "",
        f"{'seconds per step':<66} {'value':>9}",
        row("simulated on the profile measured apart", simulated),
        row("simulated on the profile measured as the ranks train", trained),
        row("measured on the ranks: inside the Program (median, slower rank)", m["program"]),
        row("measured on the ranks: host work outside the Program", outside),
        row("measured apart: Ray round trip of an empty call to both ranks", m["call"]),
        row("predicted step: simulated (as they train) + outside + round trip", predicted),
        row(f"measured step on the driver (median of {steps}, after profiling)", wall),
        row("a rank CPU seconds per step (median, slower rank)", m["rank_cpu"]),
        f"{'share of a core: CPU over wall seconds, the rank with less (median)':<66} {m['share']:>9.3f}",
        "",
        f"step: measured / predicted {figures['step_ratio']:.3f} ({figures['step_ratio'] - 1:+.1%}); Program: measured / "
        f"simulated {figures['program_ratio']:.3f} ({figures['program_ratio'] - 1:+.1%}); target within {TARGET:.0%}",
        f"on the profile measured apart: step {figures['step_ratio_apart']:.3f} ({figures['step_ratio_apart'] - 1:+.1%}), "
        f"Program {m['program'] / simulated:.3f}; the rank's CPU seconds per step over that simulation "
        f"{m['rank_cpu'] / simulated:.3f}: two ranks and Ray on these cores slow each operator, copy and all-reduce "
        "against the same work measured apart, which a profile measured as they train counts",
        f"driver step times spread {spread(m['walls']):.0%} of their median (interquartile)",
        load.describe(),
    ]
    warning = busy_warning(load)
    if warning:
        lines.append(f"WARNING: {warning}")
    return lines, figures


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="small-cnn")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=32, help="the model's size (small-cnn: its image side)")
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--link-gbps", type=float, default=2.0, help="the cpu backend's emulated link (default 2)")
    p.add_argument("--repeats", type=int, default=5, help="of each reduction size, for the network's fit")
    p.add_argument("--ranks", type=int, default=WORLD, help="1: the control, a rank alone (no all-reduce)")
    p.add_argument("--quick", action="store_true", help="a small model and few steps: the structure, for tests")
    p.add_argument("--save", action="store_true", help="write bench/results/ranks_measured_<ranks>_<date>.txt")
    a = p.parse_args(argv)
    if a.quick:
        a.batch, a.size, a.steps, a.repeats = 8, None, 3, 2
    head = [f"# python -m bench.ranks_measured {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip(),
            f"# machine (timed here): {platform.platform()}, {os.cpu_count()} cores: {cpu_name()}; "
            f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
            f"# {a.ranks} rank(s) on a local Ray, cpu backend, the Program's own all-reduce (exact: all-gather, rank-order "
            "sum); measured step beside the simulator's"]
    import ray

    try:
        lines, _ = run(a.model, a.batch, a.size, a.steps, a.link_gbps, a.repeats, world=a.ranks)
    finally:
        ray.shutdown()
    text = "\n".join(head + lines) + "\n"
    print(text, end="")
    if a.save:
        print(f"saved to {save_results(f'ranks_measured_{a.ranks}', text)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
