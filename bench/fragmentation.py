"""Paper 001 Figure 3's shape: bytes an allocator reserves against bytes the schedule requests.

001 lets its schedule-window swapper plan within a scheduling budget and measures what the
framework's allocator then holds: with best fit (NNL's default, like PyTorch's and TensorFlow's)
almost 2x the budget at ResNet-50 batch 928 ("network consumes almost 16GB while we set 8GB");
with virtual addressing close to 1x. Here, for ResNet-50 (``wresnet-50-1``, 224x224) on a 16 GiB
device:

1. The schedule's requests: the ``window`` policy plans within the budget's pool, its tensors
   placed by ``va`` with the finest chunk a GPU maps (2 MiB: next to no internal fragmentation,
   so its requests are the schedule's own). Every alloc and free it made is recorded.
2. Fragmentation (Figure 3): those requests, in order, replayed on each allocator with no
   capacity limit: its high-water mark of reserved bytes (segments for ``bestfit``, physical
   chunks for ``va``) over the high-water mark of requested bytes. Target: ``va`` <= 1.1 at 928.
3. Capped: each allocator driving the ``window`` policy itself within the 16 GiB budget (the
   policy waits for swap-outs when the allocator has no room): whether it plans, its peaks, and
   the simulated images/s on the analytic profile (V100 with NVLink when registered, else V100).

    python -m bench.fragmentation [--batches 256,512,928,1120,1440] [--memory-gib 16] [--save]
                                  [--plot bench/results/fragmentation_<date>.png]
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time

from tabulate import tabulate

import zoo
from allocator.online import make_online_allocator, recorded, replay
from bench.results_file import Transcript, cpu_name, save_results
from engine.profile import DEVICES, analytic_profile
from planner import policy
from planner.budget import make_budget
from planner.errors import PlanError
from planner.facts import GraphFacts
from planner.policy import PlanRequest
from planner.simulate import simulate
from planner.verify import verify

MODEL = "wresnet-50-1"
MIB = 2**20
GIB = 2**30
SCHEDULE_CHUNK = 2 * MIB                   # the finest a GPU maps: the schedule's own requests
PLOT_BATCH = 928                           # 001's Figure 3 batch: the one whose allocator calls are plotted
# Allocators the schedule's requests are replayed on: (label, name, options).
REPLAYED = (("bestfit", "bestfit", {}),
            ("va 20 MiB", "va", {"chunk_bytes": 20 * MIB}),
            ("va 40 MiB (001)", "va", {"chunk_bytes": 40 * MIB}),
            ("va 2 MiB", "va", {"chunk_bytes": 2 * MIB}))
CAPPED = (("bestfit", "bestfit", {}), ("va 20 MiB", "va", {"chunk_bytes": 20 * MIB}))
PAPER = ("Paper 001 Fig. 3 (V100 16 GB, ResNet-50): scheduling alone (best fit) uses almost 2x its "
         "scheduling budget at batch 928 (about 16 GB for an 8 GB budget) and cannot run above 928; "
         "with VA (40 MB chunks) actual usage stays close to the budget up to batch 1440.")


def profile_name() -> str:
    return next((d for d in ("v100-nvlink", "v100") if d in DEVICES), "v100")


def machine() -> str:
    return f"{platform.platform()}, {os.cpu_count()} cores: {cpu_name()}"


def plan_window(g, facts, budget, profile, secs, allocator: str, options: dict):
    """(Program or None, the recorded allocator that placed it, PlanError or None)."""
    with recorded() as made:
        try:
            program = policy.get("window").make(PlanRequest(g, facts, budget, profile, secs, allocator=allocator,
                                                           allocator_options=options))
        except PlanError as e:
            return None, (made[-1] if made else None), e
    # the search plans several windows: the allocator whose layout is the Program's arena
    chosen = next(a for a in reversed(made)
                  if len(a.layout().object_offset) == program.arena.num_objects
                  and (a.layout().object_offset == program.arena.object_offset).all())
    verify(program, g, budget.device_bytes)
    return program, chosen, None


def gib(n: int) -> str:
    return f"{n / GIB:.2f}"


def window_budget(facts: GraphFacts, device_bytes: int):
    """The budget the window plans within, refused only below what its allocators need (the
    heaviest operator's tensors and the scratch), not below the size-class pool's smallest
    allocation: that gate said ResNet-50 batch 1440 could not run in 16 GiB (16.2 GiB) while
    bench.table1_001 and the window itself planned it."""
    return make_budget(facts, device_bytes, allocators=tuple(name for _, name, _ in CAPPED + REPLAYED))


def run(batches, memory_gib: float, say) -> tuple[list, list, dict]:
    """(Figure 3 rows, capped rows, {label: history} at batch PLOT_BATCH for the plot)."""
    profile = analytic_profile(profile_name())
    fig3, capped, histories = [], [], {}
    for batch in batches:
        g = zoo.build(MODEL, batch=batch)
        facts = GraphFacts(g)
        try:
            budget = window_budget(facts, int(memory_gib * GIB))
        except PlanError as e:          # one operator alone needs more than the device
            say(f"batch {batch}: {e}")
            fig3.append([batch, "x"] + ["x"] * len(REPLAYED))
            capped.extend([batch, label] + ["x"] * 5 for label, _, _ in CAPPED)
            continue
        secs = profile.node_seconds(g)
        t0 = time.perf_counter()
        program, schedule, err = plan_window(g, facts, budget, profile, secs, "va", {"chunk_bytes": SCHEDULE_CHUNK})
        if program is None:
            say(f"batch {batch}: the window cannot plan within {memory_gib} GiB ({err})")
            fig3.append([batch, "x"] + ["x"] * len(REPLAYED))
        else:
            requested = schedule.stats().peak_requested_bytes
            row = [batch, gib(requested)]
            for label, name, options in REPLAYED:
                a = make_online_allocator(name, 1 << 50, keep_history=batch == PLOT_BATCH, **options)
                replay(schedule.calls, a)
                s = a.stats()
                assert s.peak_requested_bytes == requested
                row.append(f"{gib(s.peak_reserved_bytes)} ({s.peak_ratio:.2f}x)")
                if batch == PLOT_BATCH:
                    histories[label] = a.counter.history
            fig3.append(row)
        for label, name, options in CAPPED:
            program, alloc, err = plan_window(g, facts, budget, profile, secs, name, options)
            if program is None:
                capped.append([batch, label, "x", "x", "x", "x", "x"])
                continue
            s = alloc.stats()
            seconds = simulate(program, g, profile, secs).total
            capped.append([batch, label, gib(s.peak_requested_bytes), gib(s.peak_reserved_bytes),
                           f"{s.peak_ratio:.2f}", gib(program.arena.arena_bytes), f"{batch / seconds:.0f}"])
        say(f"batch {batch}: {time.perf_counter() - t0:.1f} s")
    return fig3, capped, histories


def figure(histories: dict, budget_bytes: int):
    """Reserved and requested bytes over one iteration's allocator calls at batch 928, a panel per
    allocator ({label: [(reserved, requested)] per call}), each with the budget the window planned
    within drawn across it. Raises ImportError without matplotlib."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.2 * len(histories), 4.2), layout="constrained")
    axes = fig.subplots(1, len(histories), sharey=True, squeeze=False)[0]
    budget = budget_bytes / GIB
    for ax, (label, history) in zip(axes, histories.items()):
        reserved = [r / GIB for r, _ in history]
        requested = [q / GIB for _, q in history]
        ax.plot(requested, label="requested (live tensors)", color="tab:blue", linewidth=0.8)
        ax.plot(reserved, label="reserved (held by the allocator)", color="tab:green", linewidth=1.6)
        ax.axhline(budget, color="tab:red", linestyle="--", linewidth=1.2, zorder=1.9,      # under the data
                   label=f"budget: {budget:g} GiB device" + (" (001's V100: 16 GB)" if budget == 16 else ""))
        ax.set_title(f"{label}: peak reserved {max(reserved) / max(requested):.2f}x peak requested", fontsize=10)
        ax.set_xlabel("allocator call (allocs and frees, in order)")
    axes[0].set_ylabel("memory (GiB)")
    axes[0].set_ylim(bottom=0)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=9)
    fig.suptitle(f"{MODEL} 224x224, batch {PLOT_BATCH}: one iteration of the window policy's requests (planned "
                 f"within {budget:g} GiB) replayed on each allocator without a cap\n001's Figure 3 set an 8 GB "
                 f"scheduling budget on its 16 GB V100 and best fit held almost 16 GB; above the dashed line an "
                 f"allocator holds more than the device has")
    return fig


def plot(histories: dict, path: str, budget_bytes: int) -> str | None:
    """``figure`` saved to ``path``; None without matplotlib."""
    try:
        fig = figure(histories, budget_bytes)
    except ImportError:
        return None
    fig.savefig(path, dpi=110)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fragmentation", description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="256,512,928,1120,1440")
    ap.add_argument("--memory-gib", type=float, default=16.0)
    ap.add_argument("--plot", default=None, help="where the plot goes (default: beside the results, "
                                                 "bench/results/fragmentation_<date>.png, with --save)")
    ap.add_argument("--save", action="store_true", help="also write bench/results/fragmentation_<date>.txt")
    a = ap.parse_args(argv)
    if "window" not in policy.names():
        print("bench.fragmentation: the window policy is not registered", file=sys.stderr)
        return 2
    batches = [int(b) for b in a.batches.split(",")]
    say = Transcript()

    say(f"# bench.fragmentation, {datetime.date.today().isoformat()}, {machine()}")
    say(f"# {MODEL} 224x224, {a.memory_gib:g} GiB device, window policy, profile {profile_name()} "
        f"(analytic); no timing on this machine: every figure is bytes or simulated")
    fig3, capped, histories = run(batches, a.memory_gib, say)
    say()
    say("Figure 3's measure: the window's requests (planned within the budget on va 2 MiB chunks) replayed "
        "on each allocator without a capacity limit; peak reserved GiB (peak reserved / peak requested)")
    say(tabulate(fig3, headers=["batch", "requested GiB"] + [label for label, _, _ in REPLAYED],
                 tablefmt="github"))
    say()
    say(f"Capped: each allocator driving the window within {a.memory_gib:g} GiB (x: cannot plan)")
    say(tabulate(capped, headers=["batch", "allocator", "peak requested GiB", "peak reserved GiB",
                                  "reserved/requested", "arena GiB", "sim images/s"], tablefmt="github"))
    say()
    say(PAPER)
    if histories:
        path = a.plot or (os.path.join("bench", "results", f"fragmentation_{datetime.date.today().isoformat()}.png")
                          if a.save else None)
        if path:
            written = plot(histories, path, int(a.memory_gib * GIB))
            say(f"plot: {written}" if written else "plot skipped: matplotlib is not installed (pip install '.[plot]')")
    if a.save:
        print(f"saved {save_results('fragmentation', say.text())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
