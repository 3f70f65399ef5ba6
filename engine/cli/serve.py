"""``python -m engine.serve``: N copies of a forward-only model served under a Poisson load,
latency percentiles at the end (the server: engine/library/server.py).

    python -m engine.serve --model resnet-50 --size 32 --batch 2 --models 4 --memory 400MiB \\
        --rate 20 --seconds 10
"""
from __future__ import annotations

import argparse
import math
import sys

from planner.facts import GraphFacts

from ..errors import EngineError
from ..files import memory_refusal
from ..ir import PERSISTENT_KINDS
from ..library.inference import forward_graph
from ..library.server import Server, serving_costs  # noqa: F401  (serving_costs: engine.serve's library)
from ..serving import poisson_arrivals
from ..units import format_bytes
from .flags import UsageError, _DefaultsShown, _Parser, positive_float, positive_int, seed, size

PROG = "engine.serve"


# ---------------------------------------------------------------------------- command line
def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=f"python -m {PROG}", allow_abbrev=False, formatter_class=_DefaultsShown,
                description="Serve N copies of a forward-only model (own weights, partitioned memory) under a "
                            "Poisson load and report latency percentiles.")
    p.add_argument("--model", default="resnet-50", help="a forward-only zoo model: resnet-D")
    p.add_argument("--batch", type=positive_int, default=1, help="requests per batch")
    p.add_argument("--size", type=positive_int, default=32, help="image side")
    p.add_argument("--models", type=positive_int, default=4, help="copies served, each with its own weights")
    p.add_argument("--memory", type=size, default=None, metavar="SIZE",
                   help="device memory shared by the models (default: half of what all of them need unlimited)")
    p.add_argument("--rate", type=positive_float, default=10.0, help="requests per second, Poisson")
    p.add_argument("--seconds", type=positive_float, default=10.0, help="how long to send requests")
    p.add_argument("--backend", default="cpu", help="cpu, cuda or auto")
    p.add_argument("--seed", type=seed, default=0, help="seed of the arrivals")
    return p


ARRIVAL_BYTES = 16          # an arrival's time and model, at least


def check_host(args, g, device: int) -> int:
    """The number of batches the load sends, refused in one line where the host cannot hold the
    models or the arrivals (--rate 1e6 --seconds 1e6 allocated 7 TiB of arrival times, --rate
    1e200 --seconds 1e200 was an OverflowError, --models 10**6 ran out of threads)."""
    requests = args.rate * args.seconds
    batches = requests / args.batch
    why = (f"{requests:.3g} requests" if not math.isfinite(requests) else
           memory_refusal(math.ceil(batches) * ARRIVAL_BYTES, f"the arrival times of its {batches:.3g} batches"))
    if why:
        raise UsageError(f"--rate {args.rate:g} for --seconds {args.seconds:g}: {why}; give a lower --rate or fewer "
                         "--seconds")
    weights = sum(g.tensors[t].nbytes for t in g.leaves(*PERSISTENT_KINDS))
    why = memory_refusal(device + args.models * weights, f"{args.models} models (their device memory and weights)")
    if why:
        raise UsageError(f"--models {args.models}: {why}; serve fewer models or a smaller one")
    return max(1, math.ceil(batches))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parser().parse_args(argv)
        g = forward_graph(args.model, args.batch, args.size)
        device = args.memory or GraphFacts(g).peak_bytes * args.models // 2
        batches = check_host(args, g, device)
        arrivals = poisson_arrivals(args.rate, args.batch, args.models, batches, args.seed)
        server = Server(args.model, args.models, device, args.batch, args.size, args.backend)
        try:
            wall = server.replay(arrivals)
            p = server.percentiles((50, 90, 99))
        finally:
            server.close()
        print(f"{args.models} x {g.name} (batch {args.batch}) on {format_bytes(device)}, "
              f"{format_bytes(device // args.models)} each: {batches} batches in {wall:.1f} s, "
              f"device busy {sum(server.service) / wall:.0%}; latency p50 {p[50] * 1e3:.1f} ms, "
              f"p90 {p[90] * 1e3:.1f} ms, p99 {p[99] * 1e3:.1f} ms")
        return 0
    except EngineError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
