"""The paper's Table 1 for our builders: ``python -m zoo.stats``.

Builds each evaluated model at the paper's configuration and batch size
(graphs only: no tensor data is allocated) and prints, beside the paper's
figures, our operator count, distinct tensor sizes, the bytes of all tensors,
the parameter bytes, and the peak memory of an unlimited-memory run in the
default (insertion) order. ``--json FILE`` also writes the figures.

Then the GPT presets (zoo/gpt.py) at their own batch and sequence length: parameters, and
the bytes of parameters, of activations (every forward intermediate result), of the
optimizer's state (AdamW's two moments and step counts: the memory ZeRO-Offload and
SmartSwap move) and the unlimited-memory peak. ``--gpt`` prints that table alone.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass

from tabulate import tabulate
from tqdm import tqdm

from engine.ir import Graph, Kind
from engine.liveness import peak_bytes

import zoo

GIB = 2**30     # one unit everywhere: engine.train prints binary sizes too


@dataclass(frozen=True)
class PaperRow:
    model: str          # our name for it
    label: str          # the paper's
    batch: int
    mem_gb: float       # Table 1 "MemUsage"
    ops: int
    sizes: int


# SwapAdvisor Table 1 (batch 64 for CNNs, 256 for the RNN, 128 for the BRNN).
PAPER = (
    PaperRow("wresnet-152-10", "WResNet-152-10", 64, 180, 882, 26),
    PaperRow("inception-4", "Inception-4", 64, 71, 830, 64),
    PaperRow("nasnet-25", "NasNet-25", 64, 193, 5533, 65),
    PaperRow("rnn-8-8k", "RNN-8-8K", 256, 118, 8594, 7),
    PaperRow("brnn-4-8k", "BRNN-4-8K", 128, 99, 9034, 9),
)


@dataclass
class ModelStats:
    model: str
    batch: int
    input: str
    operators: int
    updates: int            # sgd_update nodes: MXNet applies the optimizer outside its graph
    distinct_sizes: int
    total_bytes: int
    parameter_bytes: int
    peak_bytes: int
    build_seconds: float


def input_description(g: Graph) -> str:
    inputs = g.leaves(Kind.INPUT)
    shape = g.shape(inputs[0])
    if len(shape) == 4:
        return f"{shape[2]}x{shape[3]}"
    return f"{len(inputs)} steps"


def measure(model: str, batch: int, **options) -> ModelStats:
    start = time.perf_counter()
    g = zoo.build(model, batch=batch, **options)
    built = time.perf_counter() - start
    s = g.summary()
    updates = sum(n.op == "sgd_update" for n in g.nodes)
    return ModelStats(model, batch, input_description(g), s.operators, updates, s.distinct_sizes, s.total_bytes,
                      sum(g.tensors[t].nbytes for t in g.leaves(Kind.PARAMETER)), peak_bytes(g), built)


def table(rows: list[tuple[PaperRow, ModelStats]]) -> str:
    body = [[p.label, m.batch, m.input,
             m.operators, m.operators - m.updates, p.ops, m.distinct_sizes, p.sizes,
             m.peak_bytes / GIB, m.total_bytes / GIB, float(p.mem_gb), m.parameter_bytes / GIB]
            for p, m in rows]
    headers = ["model", "batch", "input", "ops", "ops w/o update", "paper ops", "sizes", "paper sizes",
               "peak GiB", "all tensors GiB", "paper GB", "params GiB"]
    return tabulate(body, headers=headers, colalign=("left",) + ("right",) * 11, floatfmt=".1f")


@dataclass
class PresetStats:
    model: str
    batch: int
    seq: int
    parameters: int
    parameter_bytes: int
    activation_bytes: int
    optimizer_state_bytes: int
    peak_bytes: int


def measure_preset(model: str) -> PresetStats:
    g = zoo.build(model)
    by_kind = g.summary().bytes_by_kind
    params = g.leaves(Kind.PARAMETER)
    tokens = g.shape(g.leaves(Kind.INPUT)[0])
    leaf_bytes = {kind: sum(g.tensors[t].nbytes for t in g.leaves(kind)) for kind in (Kind.PARAMETER, Kind.STATE)}
    return PresetStats(model, tokens[0], tokens[1], sum(math.prod(g.shape(t)) for t in params),
                       leaf_bytes[Kind.PARAMETER], by_kind["activation"], leaf_bytes[Kind.STATE], peak_bytes(g))


def preset_table(rows: list[PresetStats]) -> str:
    body = [[m.model, m.batch, m.seq, m.parameters / 1e6, m.parameter_bytes / GIB, m.activation_bytes / GIB,
             m.optimizer_state_bytes / GIB, m.peak_bytes / GIB] for m in rows]
    headers = ["GPT preset", "batch", "seq", "params M", "params GiB", "activations GiB", "optimizer state GiB",
               "peak GiB"]
    return tabulate(body, headers=headers, colalign=("left",) + ("right",) * 7, floatfmt=".1f")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m zoo.stats", description=__doc__.splitlines()[0])
    p.add_argument("--json", metavar="FILE", help="also write the figures to this JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--gpt", action="store_true", help="only the GPT presets' table")
    args = p.parse_args(argv)
    if not args.gpt:
        table_1(args)
    print()
    print(preset_table([measure_preset(name) for name in zoo.GPT_PRESETS]))
    print("float32, GiB = 2^30 bytes (as engine.train prints). params and optimizer state (AdamW's moments and step counts): current "
          "values (their next values are as large again, and gradients as large as the parameters); "
          "activations: every forward result of the iteration; peak as above.")
    return 0


def table_1(args) -> None:
    rows = []
    progress = tqdm(PAPER, desc="building", unit="model", disable=args.quiet, file=sys.stderr, leave=False)
    for paper in progress:
        progress.set_postfix_str(paper.model)
        rows.append((paper, measure(paper.model, paper.batch)))
    print(table(rows))
    print("GiB = 2^30 bytes, as engine.train prints; paper GB as the paper gives it. ops w/o update: without the sgd_update nodes. peak: unlimited-memory run in "
          "insertion order (engine.liveness.peak_bytes); all tensors: sum over every tensor of the "
          "iteration; params: current values only.")
    print(f"graphs built in {sum(m.build_seconds for _, m in rows):.1f} s, without tensor data")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"paper": asdict(p), "ours": asdict(m)} for p, m in rows], f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
