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
    python -m bench.serving --replot bench/results/serving_<date>.txt [--plot PATH]    # the plot again, from the data
"""
from __future__ import annotations

import argparse
import datetime
import os
import re
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
# One look per strategy, the same in every panel: the colour says how memory is shared, the line
# style and marker how many models share it.
KIND_COLOURS = {"not_shared": "black", "partitioned": "tab:blue", "partitioned-no-prefetch": "tab:orange",
                "time_shared": "tab:red"}
COUNT_LINES = {1: ("-", "o"), 4: ("--", "s"), 16: ("-.", "^")}


def curve_name(strategy: str, n: int) -> str:
    return f"{strategy} {n}" if strategy != "not_shared" else "not_shared"


STYLES = {curve_name(strategy, n): dict(color=KIND_COLOURS[strategy], linestyle=COUNT_LINES[n][0],
                                        marker=COUNT_LINES[n][1])
          for strategy, n in CONFIGS}
SATURATED_S = 5.0                  # p99 past this runs off the chart: such points are left off
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
    rows, curves, left_out = [], {}, {}
    for strategy, n in CONFIGS:
        name = curve_name(strategy, n)
        if n in refused and strategy.startswith("partitioned"):
            rows.append([name, "-", "-", "-", "-", "N/A", refused[n]])
            left_out[name] = refused[n]
            continue
        c = costs[n]
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
    return rows, cost_rows, curves, left_out


def identical_groups(curves: dict) -> list[list[str]]:
    """The curves' names, those whose points are all equal grouped together (in CONFIGS order)."""
    groups: list[list[str]] = []
    for name, points in curves.items():
        same = next((g for g in groups if np.array_equal(np.asarray(curves[g[0]], float), np.asarray(points, float))),
                    None)
        if same is None:
            groups.append([name])
        else:
            same.append(name)
    return groups


def setting_line(batch: int, search_seconds: float, batches: int) -> str:
    return (f"ResNet-152 224x224, batch {batch}, analytic V100 profile, partition plans after {search_seconds:g} s "
            f"of search, {batches} Poisson batches per point")


def figure(panels: dict, setting: str, source: str | None = None):
    """p99 latency against served throughput, one panel per memory size ({GiB: (curves, left
    out)}: curves {name: [(served req/s, p50 s, p99 s, busy)] per rate}, left out {name: why}).
    Each strategy has its STYLES look in every panel; strategies with identical numbers are
    drawn once, one legend entry naming them all. Raises ImportError without matplotlib."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6 * len(panels), 6.2), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
    merged = False
    for ax, (gib, (curves, left_out)) in zip(axes, panels.items()):
        for group in identical_groups(curves):
            shown = [p for p in curves[group[0]] if p[2] < SATURATED_S]
            label = group[0] if len(group) == 1 else " = ".join(group) + " (identical numbers)"
            merged |= len(group) > 1
            ax.plot([p[0] for p in shown], [p[2] * 1e3 for p in shown], label=label, markersize=5,
                    **STYLES[group[0]])
        for name, why in left_out.items():          # no curve: say so where it would be
            ax.plot([], [], label=f"{name}: not plotted ({why.split(':')[0]}: a share is too small)",
                    **STYLES[name], alpha=0.4)
        ax.set_xlabel("served throughput (requests/s)")
        ax.set_yscale("log")
        ax.set_title(f"{gib:g} GiB shared", fontsize=11)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=1)   # below: hides no data
    axes[0].set_ylabel("p99 latency (ms, log scale)")
    fig.suptitle(f"SwapAdvisor Figure 8, simulated: p99 latency against throughput, N models sharing one device\n"
                 f"{setting}", fontsize=11)
    notes = ["colour: how memory is shared; line style and marker: how many models (solid o: 1, dashed square: 4, "
             f"dash-dot triangle: 16). Points with p99 above {SATURATED_S:g} s (saturated) are left off."]
    if merged:
        notes.append("Strategies with identical numbers are drawn once and named together: there every model fits "
                     "its memory whole, so nothing is swapped or loaded and they serve exactly as not_shared.")
    if source:
        notes.append(f"Data: {source}.")
    fig.supxlabel("\n".join(notes), fontsize=8)
    return fig


def plot(panels: dict, path: str, setting: str, source: str | None = None) -> str | None:
    """``figure`` saved to ``path``; None without matplotlib."""
    try:
        fig = figure(panels, setting, source)
    except ImportError:
        return None
    fig.savefig(path, dpi=120)
    return path


def read_results(text: str) -> tuple[dict, str]:
    """The panels ({GiB: (curves, left out)}, as ``figure`` takes them) and the setting line of a
    saved results file, so that a plot is redrawn without simulating again. Throughput is read
    back to the request/s, latencies to the tenth of a millisecond, as the tables print them."""
    panels, setting, current = {}, "", None
    for line in text.splitlines():
        m = re.match(r"Ours, simulated: batch (\d+), .*?, ([\d.]+) GiB shared, .*? after ([\d.]+) s of search, "
                     r"(\d+) Poisson", line)
        if m:
            current = panels.setdefault(float(m[2]), ({}, {}))
            setting = setting_line(int(m[1]), float(m[3]), int(m[4]))
            continue
        fields = re.split(r"\s{2,}", line.strip())
        if current is None or len(fields) < 7 or fields[0] == "strategy" or set(fields[0]) == {"-"}:
            continue
        if fields[0] == "Check against a real run on the CPU backend":
            current = None
            continue
        name, _, served, busy, p50, p99 = fields[:6]
        if name not in STYLES:
            continue
        if served == "-":
            current[1][name] = fields[6]
        else:
            current[0].setdefault(name, []).append((float(served), float(p50) / 1e3, float(p99) / 1e3,
                                                    float(busy.rstrip("%")) / 100))
    if not panels:
        raise ValueError("no 'Ours, simulated' tables: not a bench.serving results file")
    return panels, setting


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
    ap.add_argument("--replot", metavar="RESULTS.txt", help="only draw the plot again from a saved results file "
                    "(no simulation); it goes to --plot")
    ap.add_argument("--plot", metavar="PATH", help="where the plot goes (default: beside the results with --save; "
                                                   "bench/results/serving_<today>.png with --replot)")
    args = ap.parse_args(argv)
    if args.replot:
        with open(args.replot) as f:
            panels, setting = read_results(f.read())
        path = args.plot or os.path.join("bench", "results", f"serving_{datetime.date.today().isoformat()}.png")
        png = plot(panels, path, setting, source=args.replot)
        print(f"saved {png}" if png else "plot skipped: matplotlib is not installed (pip install '.[plot]')")
        return
    out = [f"SwapAdvisor Figure 8: serving N ResNet-152 on one device, {datetime.date.today().isoformat()}, "
           f"{cpu_name()}", PAPER, "",
           "The paper does not give the memory its models shared; ours is a parameter. partitioned: weights "
           "stream in while other models compute (the paper's); partitioned-no-prefetch: one plan after "
           "another (what engine/library/server.Server does). Rates past saturation (served < offered) grow "
           "without bound with the number of batches simulated.", ""]
    panels = {}
    for gib in (float(x) for x in str(args.memory_gib).split(",")):
        rows, cost_rows, curves, left_out = figure8(args.batch, int(gib * 2**30), args.search_seconds, args.batches,
                                                    args.seed)
        panels[gib] = (curves, left_out)
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
        png = plot(panels, args.plot or os.path.splitext(path)[0] + ".png",
                   setting_line(args.batch, args.search_seconds, args.batches), source=path)
        print(f"saved {path}" + (f" and {png}" if png else " (plot skipped: matplotlib is not installed)"),
              file=sys.stderr)


if __name__ == "__main__":
    main()
