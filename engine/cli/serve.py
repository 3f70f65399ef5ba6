"""``python -m engine.serve``: N copies of a forward-only model served under a Poisson load,
latency percentiles at the end (the server: engine/library/server.py).

    python -m engine.serve --model resnet-50 --size 32 --batch 2 --models 4 --memory 400MiB \\
        --rate 20 --seconds 10

The flags it shares with the other commands are engine/cli/common_flags.py's.
"""
from __future__ import annotations

import argparse
import math

from planner.facts import GraphFacts

from ..backend_registry import choose
from ..data import TeacherData
from ..errors import UsageError
from ..files import memory_refusal
from ..library.inference import forward_graph
from ..library.models import batch_of
from ..library.planning import profile_of
from ..library.server import Server, check_share, serving_costs, weight_bytes  # noqa: F401  (serving_costs: engine.serve's library)
from ..serving import poisson_arrivals
from ..units import format_bytes
from . import common_flags as shared
from .command import namespace_settings, run_command
from .flag_types import positive_float, positive_int
from .plans import describe_profile, profile_source, resolve_profile
from .preflight import check_names
from .report_json import JsonReport

PROG = "engine.serve"


# ---------------------------------------------------------------------------- command line
def parser() -> argparse.ArgumentParser:
    p = shared.command_parser(PROG, "Serve N copies of a forward-only model (own weights, partitioned memory) "
                                    "under a Poisson load and report latency percentiles.")
    shared.add_model(p, shared.inference_models(shared.SERVING))
    shared.add_batch(p)
    shared.add_size(p)
    p.add_argument("--models", type=positive_int, default=4, help="copies served, each with its own weights")
    shared.add_memory(p, "half of what all the models need unlimited; each model plans in its share")
    p.add_argument("--rate", type=positive_float, default=10.0, help="requests per second, Poisson")
    p.add_argument("--seconds", type=positive_float, default=10.0, help="how long to send requests")
    shared.add_profile(p)
    shared.add_backend(p)
    shared.add_seed(p)
    shared.add_json(p)
    return p


ARRIVAL_BYTES = 16          # an arrival's time and model, at least


def check_host(args, g, batch: int, device: int) -> int:
    """The number of batches the load sends, refused in one line where the host cannot hold the
    models or the arrivals (--rate 1e6 --seconds 1e6 allocated 7 TiB of arrival times, --rate
    1e200 --seconds 1e200 was an OverflowError, --models 10**6 ran out of threads)."""
    requests = args.rate * args.seconds
    batches = requests / batch
    why = (f"{requests:.3g} requests" if not math.isfinite(requests) else
           memory_refusal(math.ceil(batches) * ARRIVAL_BYTES, f"the arrival times of its {batches:.3g} batches"))
    if why:
        raise UsageError(f"--rate {args.rate:g} for --seconds {args.seconds:g}: {why}; give a lower --rate or fewer "
                         "--seconds")
    weights = weight_bytes(g)
    why = memory_refusal(device + args.models * weights, f"{args.models} models (their device memory and weights)")
    if why:
        raise UsageError(f"--models {args.models}: {why}; serve fewer models or a smaller one")
    return max(1, math.ceil(batches))


def run(args, report: JsonReport | None = None) -> int:
    report = report or JsonReport([], None, PROG)
    check_names((("--profile", args.profile),))     # '' read as not given: the default, silently
    g = forward_graph(args.model, args.batch, args.size)
    batch = batch_of(g)
    facts = GraphFacts(g)
    device = args.memory or facts.peak_bytes * args.models // 2
    check_share(facts, device, args.models)             # before measuring or planning anything
    batches = check_host(args, g, batch, device)
    profile = profile_of(args.profile) if args.profile else None      # a bad file: refused before the run prints
    placement = choose(args.backend, args.device, args.link_gbps)
    report.update(model=g.name, batch=batch, models=args.models, budget_bytes=device,
                  share_bytes=device // args.models, **placement.kind.to_json(placement, ""))
    print(placement.announcement())
    profile = profile or resolve_profile(None, placement, g, args.seed, TeacherData(g, args.seed, samples=4 * batch))
    source = profile_source(args.profile, profile)
    report.update(profile=source)
    print(f"profile {describe_profile(source, 's/batch')}")
    arrivals = poisson_arrivals(args.rate, batch, args.models, batches, args.seed)
    server = Server(args.model, args.models, device, batch, args.size, placement, profile, sanitize=args.sanitize)
    try:
        wall = server.replay(arrivals)
        p = server.percentiles((50, 90, 99))
    finally:
        server.close()
    busy = sum(server.service) / wall
    report.update(batches=batches, wall_s=wall, busy_fraction=busy, latency_p50_s=p[50], latency_p90_s=p[90],
                  latency_p99_s=p[99])
    print(f"{args.models} x {g.name} (batch {batch}) on {format_bytes(device)}, "
          f"{format_bytes(device // args.models)} each: {batches} batches in {wall:.1f} s, "
          f"device busy {busy:.0%}; latency p50 {p[50] * 1e3:.1f} ms, "
          f"p90 {p[90] * 1e3:.1f} ms, p99 {p[99] * 1e3:.1f} ms")
    return 0


def main(argv=None) -> int:
    return run_command(PROG, argv, lambda words: namespace_settings(parser().parse_args(words)), run)
