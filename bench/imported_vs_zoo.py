"""Imported PyTorch programs beside the zoo's own builds of the same architectures: torchvision's
ResNet-50 against ``wresnet-50-1`` and a GPT-2-medium-sized decoder (tests/importer/torch_models.GPT,
tied embeddings; causal attention written out as GPT-2's code does, or through
scaled_dot_product_attention) against ``gpt2-medium``, at realistic batch and
sequence, planned at 16 GiB on the analytic V100 profile. Per graph: operators, unlimited peak,
ideal seconds (the sum of op times), then SwapAdvisor's plan (keep, swap or recompute): seconds,
fraction of ideal, and its time over the lower bound for its order (x bound). The planner must do
as well on imported graphs as on ours. Needs torch and torchvision (the import only).

    python -m bench.imported_vs_zoo [--search-seconds 0] [--save]
"""
from __future__ import annotations

import argparse
import io
import sys
import time

from tabulate import tabulate

import zoo
from bench.plan_quality import machine
from bench.recompute_table import search_options
from bench.results_file import save_results
from engine.autodiff import SGD, Adam, build_training_graph
from engine.library.planning import plan, plan_bounds
from engine.profile import analytic_profile
from planner import policy
from planner.errors import PlanError
from planner.facts import GraphFacts

GIB = 1 << 30


def imported_resnet50(batch: int, size: int):
    import torch
    import torchvision

    from engine.importer.program import convert_program
    from tests.importer.torch_models import WithLoss

    torch.manual_seed(0)
    model = WithLoss(torchvision.models.resnet50(num_classes=1000)).train()
    args = (torch.randn(batch, 3, size, size), torch.randint(0, 1000, (batch,)))
    return convert_program(torch.export.export(model, args), "resnet50 (imported)").graph


def imported_gpt(batch: int, seq: int, sdpa: bool):
    import torch

    from engine.importer.program import convert_program
    from tests.importer.torch_models import GPT, WithLoss

    torch.manual_seed(0)
    model = WithLoss(GPT(vocab=50257, seq=seq, width=1024, heads=16, layers=24, sdpa=sdpa)).train()
    args = (torch.randint(0, 50257, (batch, seq)), torch.randint(0, 50257, (batch, seq)))
    return convert_program(torch.export.export(model, args), "gpt2-medium (imported)").graph


def row(label: str, g, device_bytes: int, search_seconds: float, say) -> list:
    facts = GraphFacts(g)
    profile = analytic_profile("v100")
    secs = profile.node_seconds(g)
    ideal = float(secs.sum())
    search = search_options(search_seconds)
    t0 = time.perf_counter()
    head = [label, len(g.nodes), f"{facts.peak_bytes / GIB:.1f}", f"{ideal:.3f}"]
    try:
        p = plan(g, policy.get("swapadvisor"), profile, device_bytes, search=search, facts=facts)
    except PlanError as e:
        say(f"{label}: {e}")
        return head + ["does not plan", "", "", ""]
    b = plan_bounds(p.program, facts, p.budget, profile, secs)
    say(f"{label}: {p.seconds:.3f} s ({time.perf_counter() - t0:.0f} s to plan)")
    return head + [f"{p.seconds:.3f}", f"{ideal / p.seconds:.3f}", p.program.recomputes,
                   f"{p.seconds / b.recompute_bound:.2f}"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget-gib", type=float, default=16.0)
    ap.add_argument("--resnet-batch", type=int, default=256)
    ap.add_argument("--gpt-batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--search-seconds", type=float, default=0.0)
    ap.add_argument("--save", action="store_true", help="write bench/results/imported_vs_zoo_<date>.txt")
    a = ap.parse_args(argv)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    budget = int(a.budget_gib * GIB)
    graphs = [
        ("resnet50 (imported, sgd)", lambda: build_training_graph(*_with_loss(imported_resnet50(a.resnet_batch, 224)),
                                                                  SGD())),
        ("wresnet-50-1 (zoo, sgd)", lambda: zoo.build("wresnet-50-1", batch=a.resnet_batch, size=224, optimizer=SGD())),
        ("gpt2-medium (imported, attention written out, adamw)",
         lambda: build_training_graph(*_with_loss(imported_gpt(a.gpt_batch, a.seq, False)), Adam(weight_decay=0.01))),
        ("gpt2-medium (imported, sdpa, adamw)",
         lambda: build_training_graph(*_with_loss(imported_gpt(a.gpt_batch, a.seq, True)), Adam(weight_decay=0.01))),
        ("gpt2-medium (zoo, adamw)", lambda: zoo.build("gpt2-medium", batch=a.gpt_batch, size=a.seq)),
    ]
    rows = []
    for label, build in graphs:
        t0 = time.perf_counter()
        g = build()
        say(f"{label}: built in {time.perf_counter() - t0:.0f} s, {len(g.nodes)} operators")
        rows.append(row(label, g, budget, a.search_seconds, say))
    out = io.StringIO()
    print(f"Imported PyTorch programs beside the zoo's builds: SwapAdvisor (keep, swap or recompute) at "
          f"{a.budget_gib:g} GiB, analytic V100 profile, search {a.search_seconds:g} s; ResNet batch "
          f"{a.resnet_batch} at 224, GPT batch {a.gpt_batch} x {a.seq} tokens", file=out)
    print(tabulate(rows, headers=["graph", "operators", "peak GiB", "ideal s", "swapadvisor s", "of ideal",
                                  "recomputations", "x bound"]), file=out)
    print(machine(), file=out)
    text = out.getvalue()
    print(text)
    if a.save:
        save_results("imported_vs_zoo", text)
    return 0


def _with_loss(g):
    return g, g.loss


if __name__ == "__main__":
    sys.exit(main())
