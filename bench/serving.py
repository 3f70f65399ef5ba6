"""SwapAdvisor Figure 8: p50/p99 latency against throughput, serving N ResNet-152 on one device.

Simulated (engine/serving.py) from plans on the analytic V100 profile: N copies of
ResNet-152 (224x224, own weights) share --memory; clients arrive as a Poisson process in
batches of --batch requests, each batch for a model drawn at random. Strategies:
partitioned (each model plans under memory/N with weights as persistent state; a batch takes
its plan's simulated time), time_shared (weights loaded whole into the shared memory, least
recently used model evicted, the load not overlapped), not_shared (one model, full memory).

Then a check of the simulation against a real run: --check-models copies of a small ResNet
served on the CPU backend (engine/library/server.Server, partitioned memory, one BLAS thread), the
same arrivals replayed in real time, at a rate that keeps the device at least half busy; the
simulation's p99 (plans simulated on a profile measured on this machine) beside the
measured p99, repeated.

    python -m bench.serving [--batch 16] [--memory-gib 1,2,3] [--search-seconds 20] [--check-runs 3] [--save]
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys

import numpy as np
from tabulate import tabulate

from bench.results_file import cpu_name, save_results
from engine.backend_registry import choose
from engine.blas_threads import one_blas_thread
from engine.library.inference import forward_graph, plan_inference
from engine.library.server import Server, serving_costs
from engine.profile import analytic_profile
from engine.serving import ServingError, poisson_arrivals, simulate_serving
from planner.facts import GraphFacts

RATES = (50, 100, 150, 200, 250, 300, 350, 400, 450)
CONFIGS = (("not_shared", 1), ("partitioned", 4), ("partitioned-no-prefetch", 4), ("time_shared", 4),
           ("partitioned", 16), ("partitioned-no-prefetch", 16), ("time_shared", 16))
PAPER = ("Paper (Figure 8, V100): partitioned (SwapAdvisor) p99 at most 2x not_shared below 400 req/s for 4 "
         "and 16 models; time_shared 8x not_shared at 300 req/s with 16 models; above 400 req/s latency "
         "rises steeply for both.")


def figure8(batch: int, device_bytes: int, search_seconds: float, batches: int, seed: int):
    profile = analytic_profile("v100")
    g = forward_graph("resnet-152", batch)
    costs, refused = {}, {}
    for strategy, n in CONFIGS:
        if n not in costs and n not in refused:
            try:
                costs[n] = serving_costs(g, n, device_bytes, profile, search_seconds)
            except ServingError as e:     # a share too small for one model: its rows say so
                refused[n] = str(e)
                costs[n] = serving_costs(g, n, device_bytes, profile, partitioned=False)
    rows, curves = [], {}
    for strategy, n in CONFIGS:
        if n in refused and strategy.startswith("partitioned"):
            rows.append([f"{strategy} {n}", "-", "-", "-", "-", "N/A", refused[n]])
            continue
        c = costs[n]
        name = f"{strategy} {n}" if strategy != "not_shared" else "not_shared"
        curves[name] = []
        for rate in RATES:
            arrivals = poisson_arrivals(rate, batch, n, batches, seed)
            lat = simulate_serving(strategy.split("-")[0], c, arrivals, batch, warmup=batches // 10,
                                   prefetch=not strategy.endswith("no-prefetch"))
            curves[name].append((lat.throughput_rps, lat.percentile(50), lat.percentile(99), lat.busy_fraction))
    base = {r: p99 for r, (_, _, p99, _) in zip(RATES, curves["not_shared"])}
    for name, points in curves.items():
        for rate, (thr, p50, p99, busy) in zip(RATES, points):
            rows.append([name, rate, f"{thr:.0f}", f"{busy:.0%}", f"{p50 * 1e3:.1f}", f"{p99 * 1e3:.1f}",
                         f"{p99 / base[rate]:.2f}x"])
    cost_rows = [[n, f"{c.full_s * 1e3:.2f}", f"{c.partitioned_s * 1e3:.2f}", f"{c.stream_s * 1e3:.2f}",
                  f"{c.load_s * 1e3:.2f}", c.resident_models] for n, c in sorted(costs.items())]
    return rows, cost_rows, curves


def plot(panels: dict, path: str, batch: int) -> str | None:
    """p99 latency against throughput, one panel per memory size (GiB -> curves)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    for ax, (gib, curves) in zip(axes[0], panels.items()):
        for name, points in curves.items():
            shown = [p for p in points if p[2] < 5.0]        # saturated points run off the chart
            ax.plot([p[0] for p in shown], [p[2] * 1e3 for p in shown], marker="o", label=name)
        ax.set_xlabel("throughput (requests/s)")
        ax.set_ylabel("p99 latency (ms)")
        ax.set_yscale("log")
        ax.set_title(f"ResNet-152, batch {batch}, {gib:g} GiB shared (simulated, v100)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def check(models: int, runs: int, batches: int, busy: float, seed: int, link_gbps: float):
    """Simulated against measured p99 on the CPU backend (partitioned memory)."""
    model, batch, size = "resnet-50", 2, 32
    g = forward_graph(model, batch, size)
    device_bytes = GraphFacts(g).peak_bytes * models // 2
    placement = choose("cpu", 0, link_gbps)
    ideal = plan_inference(g, None).plan.program
    profile = placement.kind.measure_profile(placement, g, ideal, 0, None)
    costs = serving_costs(g, models, device_bytes, profile)
    rate = busy * batch / costs.partitioned_s
    arrivals = poisson_arrivals(rate, batch, models, batches, seed)
    sim = simulate_serving("partitioned", costs, arrivals, batch)
    rows = []
    server = Server(model, models, device_bytes, batch, size, profile=profile, link_gbps=link_gbps)
    try:
        server.replay(poisson_arrivals(rate, batch, models, 10, seed + 1))     # warm-up
        for r in range(runs):
            server.reset()
            wall = server.replay(arrivals)
            p99 = float(np.percentile(server.latencies, 99))
            p50 = float(np.percentile(server.latencies, 50))
            service = np.array(server.service)
            rows.append([r + 1, f"{service.sum() / wall:.0%}", f"{np.median(service) * 1e3:.1f}",
                         f"{np.percentile(service, 99) * 1e3:.1f}", f"{p50 * 1e3:.1f}", f"{p99 * 1e3:.1f}",
                         f"{(sim.percentile(99) - p99) / p99:+.1%}"])
            print(tabulate([rows[-1]]), file=sys.stderr, flush=True)
    finally:
        server.close()
    head = (f"{models} x {g.name} (batch {batch}, {size}x{size}, seeds 0..{models - 1}) on {device_bytes / 2**20:.1f} MiB "
            f"({device_bytes / models / 2**20:.1f} MiB each), {batches} batches at {rate:.1f} req/s; the plan "
            f"simulated on the measured profile: {costs.partitioned_s * 1e3:.1f} ms per batch (full memory "
            f"{costs.full_s * 1e3:.1f} ms); simulated serving: device busy {sim.busy_fraction:.0%}, "
            f"p50 {sim.percentile(50) * 1e3:.1f} ms, p99 {sim.percentile(99) * 1e3:.1f} ms")
    return head, rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=16, help="requests per batch (the paper's panels: 16, 32, 64)")
    ap.add_argument("--memory-gib", default="1,2,3", help="device memory the models share, GiB (comma-separated: "
                                                     "one table and panel each)")
    ap.add_argument("--search-seconds", type=float, default=20.0, help="genetic search per partition plan")
    ap.add_argument("--batches", type=int, default=20000, help="simulated batches per point")
    ap.add_argument("--check-models", type=int, default=4)
    ap.add_argument("--check-runs", type=int, default=3, help="real runs of the check (0: skip it)")
    ap.add_argument("--check-batches", type=int, default=300)
    ap.add_argument("--check-busy", type=float, default=0.5, help="the check's planned device load")
    ap.add_argument("--check-link-gbps", type=float, default=0.5,
                    help="the check's emulated link, GB/s one way (slow: the weights streaming in dominate)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", action="store_true", help="write bench/results/serving_<date>.txt and the plot")
    args = ap.parse_args(argv)
    out = [f"SwapAdvisor Figure 8: serving N ResNet-152 on one device, {datetime.date.today().isoformat()}, "
           f"{cpu_name()}", PAPER, "",
           "The paper does not give the memory its models shared; ours is a parameter. partitioned: weights "
           "stream in while other models compute (the paper's); partitioned-no-prefetch: one plan after "
           "another (what engine/library/server.Server does). Rates past saturation (served < offered) grow "
           "without bound with the number of batches simulated.", ""]
    panels = {}
    for gib in (float(x) for x in str(args.memory_gib).split(",")):
        rows, cost_rows, panels[gib] = figure8(args.batch, int(gib * 2**30), args.search_seconds, args.batches,
                                               args.seed)
        out += [f"Ours, simulated: batch {args.batch}, 224x224, {gib:g} GiB shared, analytic V100 profile, "
                f"partition plans after {args.search_seconds:g} s of search, {args.batches} Poisson batches per "
                f"point (the first tenth not counted). Costs per batch (ms):",
                tabulate(cost_rows, headers=["models", "full memory", "partitioned plan", "its swap-ins on the link",
                                             "load weights whole", "models resident (time_shared)"],
                         disable_numparse=True), "",
                tabulate(rows, headers=["strategy", "offered req/s", "served req/s", "device busy", "p50 ms",
                                        "p99 ms", "p99 / not_shared"], disable_numparse=True), ""]
    if args.check_runs:
        with one_blas_thread():
            head, check_rows = check(args.check_models, args.check_runs, args.check_batches, args.check_busy,
                                     args.seed, args.check_link_gbps)
        out += [f"Check against a real run on the CPU backend ({cpu_name()}, emulated {args.check_link_gbps:g} GB/s "
                "link, one BLAS "
                "thread, the machine shared with other jobs): " + head,
                tabulate(check_rows, headers=["run", "device busy", "service median ms", "service p99 ms",
                                              "latency p50 ms", "latency p99 ms", "simulated p99 error"],
                         disable_numparse=True), ""]
    text = "\n".join(out)
    print(text)
    if args.save:
        path = save_results("serving", text)
        png = plot(panels, os.path.splitext(path)[0] + ".png", args.batch)
        print(f"saved {path}" + (f" and {png}" if png else " (plot skipped: matplotlib is not installed)"),
              file=sys.stderr)


if __name__ == "__main__":
    main()
