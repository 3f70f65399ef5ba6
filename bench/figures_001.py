"""Paper 001's Figures 4 and 5 (images/s and memory against batch), and its allocator-blind setting.

001 Section 5.2 trains DenseNet, Pix2PixHD and DeepLabv3+ at growing batch in 16 GB: Figure 4 is
images/s for the baseline (in memory), scheduling alone (the window with NNL's best fit) and
scheduling with VA; Figure 5 is each one's peak memory. Its claims: scheduling trains 1.5x
(DenseNet), 4x (Pix2PixHD) and 5.3x (DeepLabv3+) the baseline's largest batch (512, 4, 6);
scheduling alone then reaches the physical memory because of fragmentation; VA trains 1.5-2x
the batch of scheduling alone with memory almost constant in the batch. Of the three models
the zoo builds (``MODELS``): DenseNet-121 on 224x224 images (``zoo.densenet``), Pix2PixHD's global
generator on 001's 512x1024 Cityscapes images (``zoo.pix2pixhd``: the generator with an L1 loss; the
discriminators and the GAN, feature-matching and VGG losses are not built) and DeepLabv3+ with a
ResNet-101 backbone at output stride 16 on 513x513 crops (``zoo.deeplab``), each at batches around
001's: up to twice what its text says VA reached.

Our window plans within the budget through the allocator that places its tensors (it waits for
swap-outs when the allocator has no room), so no allocator can run out of memory under it: the
"capped" cells. 001's scheduler knew the budget, not the allocator: NNL's best fit then served
the schedule's requests and ran out of memory above 8 GB of budget at batch 928 (its Figure 3).
The "blind" cells are that setting: the window plans within a scheduling budget on exact
requests (``va`` with 2 MiB chunks, the finest a GPU maps: bench.fragmentation's schedule),
and those requests, in order, are replayed on best fit (or va with 001's 40 MiB chunks) holding
at most the 16 GiB device; the budget is walked down a ladder (16 GiB over 2^(k/8), down to
8 GiB) to the first rung whose replay fits. Its time is the schedule's simulated time (the
Program placed by the exact allocator; the replay decides whether it fits, not its timing).

Every time is simulated on the analytic v100-nvlink profile (001's two NVLinks): deterministic.

    python -m bench.figures_001 [--model densenet-121|pix2pixhd|deeplabv3plus] [--batches 64,128] [--save]
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

from tabulate import tabulate

import zoo
from allocator.online import AllocatorMisuse, make_online_allocator, replay
from bench.fragmentation import SCHEDULE_CHUNK, plan_window, window_budget
from bench.results_file import Transcript, planning_machine_line, save_results
from bench.table1_001 import DEVICE_BYTES, run_one
from engine.errors import EngineError
from engine.profile import analytic_profile
from engine.units import format_bytes
from planner.facts import GraphFacts
from planner.simulate import simulate

GIB = 2**30
MIB = 2**20
PROFILE = "v100-nvlink"
MODEL = "densenet-121"
BATCHES = (64, 128, 192, 256, 512, 768, 1024, 1280, 1536, 1792)


@dataclass(frozen=True)
class Setting:
    """One model of Figures 4 and 5 as 001 trains it: the paper's name, its image side (the zoo's
    ``size``) and what that means, and the batches we run."""
    paper: str
    size: int
    image: str
    batches: tuple[int, ...]


MODELS = {
    "densenet-121": Setting("DenseNet", 224, "224x224 ImageNet images", BATCHES),
    "pix2pixhd": Setting("Pix2PixHD", 512, "512x1024 Cityscapes images", (1, 2, 4, 8, 12, 16, 24, 32)),
    "deeplabv3plus": Setting("DeepLabv3+", 513, "513x513 PASCAL VOC crops", (2, 4, 6, 8, 16, 24, 32, 48, 64)),
}
VA_CHUNK = 40 * MIB                    # 001's physical chunk
# Section 5.2's text (Figures 4 and 5 themselves are not in our copy): the baseline's largest batch,
# scheduling's as a multiple of it, and VA's as a multiple of scheduling's.
PAPER_LARGEST = {"DenseNet": (512, 1.5), "Pix2PixHD": (4, 4.0), "DeepLabv3+": (6, 5.3)}
PAPER_VA_OVER_SCHEDULE = (1.5, 2.0)


def configurations(chunk_bytes: int = VA_CHUNK, blind: bool = False) -> tuple:
    """The allocators the window's configurations place tensors with: (label, name, options)."""
    prefix = "blind " if blind else ""
    return ((f"{prefix}schedule", "bestfit", {}), (f"{prefix}schedule + VA", "va", {"chunk_bytes": chunk_bytes}))


BLIND = configurations(blind=True)
LADDER_STEPS = 8                        # rungs per halving of the scheduling budget; one halving walked


@dataclass
class Run:
    """One configuration at one batch: None where it cannot run."""
    seconds: float | None = None
    peak_bytes: int | None = None       # the baseline's in-memory peak; an allocator's peak reserved
    budget_bytes: int | None = None     # blind: the scheduling budget whose replay fits the device
    note: str = ""

    def ips(self, batch: int) -> float | None:
        return None if self.seconds is None else batch / self.seconds


@dataclass
class Column:
    label: str
    runs: dict = field(default_factory=dict)        # batch -> Run

    def largest(self) -> int | None:
        return max((b for b, r in self.runs.items() if r.seconds is not None), default=None)


def baseline(g, facts, profile, secs, device_bytes: int) -> Run:
    """In memory (001's baseline): its peak, and its time where the peak fits."""
    seconds, note = run_one("ideal", g, facts, profile, secs, VA_CHUNK, device_bytes)
    return Run(seconds, facts.peak_bytes + facts.scratch.bytes, None, note)


def capped(g, facts, profile, secs, device_bytes: int, allocator: str, options: dict) -> Run:
    """Our setting: the window planned through ``allocator`` within the device."""
    try:
        program, alloc, err = plan_window(g, facts, window_budget(facts, device_bytes), profile, secs,
                                          allocator, options)
    except EngineError as e:                    # below the heaviest operator's need
        return Run(note=str(e))
    if program is None:
        return Run(note=str(err))
    return Run(float(simulate(program, g, profile, secs).total), alloc.stats().peak_reserved_bytes)


def ladder(device_bytes: int) -> list[int]:
    """Scheduling budgets from the device down to half of it, 2^(1/LADDER_STEPS) apart."""
    return [int(device_bytes * 2 ** (-k / LADDER_STEPS)) for k in range(LADDER_STEPS + 1)]


def blind(g, facts, profile, secs, device_bytes: int, allocators=BLIND) -> dict[str, Run]:
    """001's setting for each of ``allocators``: the highest rung whose schedule, replayed on it,
    fits the device (a Run without seconds where no rung does)."""
    found: dict[str, Run] = {}
    for budget_bytes in ladder(device_bytes):
        try:
            budget = window_budget(facts, budget_bytes)
        except EngineError:                     # lower rungs cannot run the heaviest operator either
            break
        program, schedule, _ = plan_window(g, facts, budget, profile, secs, "va", {"chunk_bytes": SCHEDULE_CHUNK})
        if program is None:                     # no room on exact requests: less budget has less
            break
        seconds = None
        for label, name, options in allocators:
            if label in found:
                continue
            a = make_online_allocator(name, device_bytes - facts.scratch.bytes, **options)
            try:
                replay(schedule.calls, a)
            except AllocatorMisuse:             # out of memory on the device: 001's OOM
                continue
            seconds = seconds or float(simulate(program, g, profile, secs).total)
            found[label] = Run(seconds, a.stats().peak_reserved_bytes, budget_bytes)
        if len(found) == len(allocators):
            break
    lowest = ladder(device_bytes)[-1]
    return {label: found.get(label, Run(note=f"no scheduling budget from {format_bytes(device_bytes)} down to "
                                             f"{format_bytes(lowest)} fits its replay"))
            for label, _, _ in allocators}


def figures(model: str, batches, device_bytes: int = DEVICE_BYTES, size: int = 224, say=print,
            chunk_bytes: int = VA_CHUNK, **options) -> dict[str, Column]:
    """Every configuration of Figures 4 and 5 at each batch: {label: Column}. ``options`` go to
    the model's builder (smaller DenseNets for quick runs)."""
    profile = analytic_profile(PROFILE)
    capped_on, blind_on = configurations(chunk_bytes), configurations(chunk_bytes, blind=True)
    cols = {label: Column(label) for label in ["baseline"] + [c[0] for c in capped_on + blind_on]}
    for b in batches:
        g = zoo.build(model, batch=b, size=size, **options)
        facts = GraphFacts(g)
        secs = profile.node_seconds(g)
        cols["baseline"].runs[b] = baseline(g, facts, profile, secs, device_bytes)
        for label, name, opts in capped_on:
            cols[label].runs[b] = capped(g, facts, profile, secs, device_bytes, name, opts)
        for label, run in blind(g, facts, profile, secs, device_bytes, blind_on).items():
            cols[label].runs[b] = run
        say(f"  batch {b}: " + ", ".join(f"{c.label} {ips_cell(c.runs[b], b)}" for c in cols.values()))
    return cols


def ips_cell(run: Run, batch: int) -> str:
    """Images/s to the unit, or three figures below 100 (Pix2PixHD runs at about 5)."""
    v = run.ips(batch)
    return "x" if v is None else f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def gib_cell(n: int | None) -> str:
    return "x" if n is None else f"{n / GIB:.2f}"


def ips_rows(cols: dict[str, Column], batches) -> list[list]:
    """Figure 4: images/s, a row per configuration."""
    return [[c.label, *(ips_cell(c.runs[b], b) for b in batches)] for c in cols.values()]


def memory_rows(cols: dict[str, Column], batches) -> list[list]:
    """Figure 5: peak GiB (the baseline's in-memory peak whether or not it fits; each allocator's
    peak reserved where it runs), and each blind cell's scheduling budget."""
    rows = [[c.label + (" (in-memory peak)" if c.label == "baseline" else " (peak reserved)"),
             *(gib_cell(c.runs[b].peak_bytes if c.label == "baseline" or c.runs[b].seconds else None) for b in batches)]
            for c in cols.values()]
    rows += [[f"{c.label} (scheduling budget)", *(gib_cell(c.runs[b].budget_bytes) for b in batches)]
             for c in cols.values() if c.label.startswith("blind")]
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.figures_001", description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=MODEL, choices=sorted(MODELS))
    ap.add_argument("--batches", default=None, help="comma-separated (default: the model's, MODELS)")
    ap.add_argument("--size", type=int, default=None, help="the image side (default: 001's for the model)")
    ap.add_argument("--save", action="store_true", help="write bench/results/figures_001_<date>.txt")
    a = ap.parse_args(argv)
    setting = MODELS[a.model]
    batches = [int(b) for b in a.batches.split(",")] if a.batches else list(setting.batches)
    a.size = a.size or setting.size
    image = setting.image if a.size == setting.size else f"side {a.size}"
    say = Transcript()

    say(f"# paper 001 Figures 4 and 5, simulated: {a.model} ({setting.paper}), {image}, 16 GiB, profile {PROFILE}")
    say(f"# {planning_machine_line()}")
    cols = figures(a.model, batches, size=a.size, say=say)
    say()
    say(tabulate(ips_rows(cols, batches), headers=["images/s", *map(str, batches)], tablefmt="github"))
    say()
    say(tabulate(memory_rows(cols, batches), headers=["GiB", *map(str, batches)], tablefmt="github"))
    say()
    say("largest batch: " + ", ".join(f"{c.label} {c.largest()}" for c in cols.values()))
    if a.save:
        name = "figures_001" if a.model == MODEL else f"figures_001_{a.model}"
        print(f"saved {save_results(name, say.text())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
