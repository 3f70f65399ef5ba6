"""Where a measured profile's time goes, by operator: the kernels' share and the rate they reach.

For a model and a profile measured on a device (bench/profiles/, or one bench.cuda_vs_torch saved),
per operator kind: how many nodes, their measured milliseconds summed over one iteration, the share
of the iteration's kernel time, and the rates the operators' own cost model counts (useful FLOP/s
and bytes/s; a convolution's zero taps or a tile's padding are not counted). Profiles side by side
(``--before``) show what a kernel change moved. No GPU needed: it reads files.

    python -m bench.profile_ops --model wresnet-50-2 --batch 32 --size 224 \\
        --profile bench/profiles/profile_wresnet-50-2_b32_s224.json [--before OLD.json] [--top 8]
"""
from __future__ import annotations

import argparse
import collections
import sys

from tabulate import tabulate

import zoo
from engine.profile import Profile, ProfileError, signature
from ops import registry


def by_operator(g, ops: dict[str, float]) -> dict[str, tuple[int, float, float, float]]:
    """Operator kind -> (nodes, seconds, FLOPs, bytes) over the graph's nodes the profile times."""
    out = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for n in g.nodes:
        s = signature(g, n.id)
        if s not in ops:
            continue
        cost = registry.get(n.op).cost(n.attrs, [g.tensors[i] for i in n.inputs], [g.tensors[o] for o in n.outputs])
        row = out[n.op]
        row[0] += 1
        row[1] += ops[s]
        row[2] += cost.flops
        row[3] += cost.bytes
    return {k: tuple(v) for k, v in out.items()}


def table(g, profile: Profile, before: Profile | None = None, top: int = 8) -> str:
    now = by_operator(g, profile.ops)
    old = by_operator(g, before.ops) if before else {}
    total = sum(v[1] for v in now.values())
    rows = []
    for op, (count, sec, flops, moved) in sorted(now.items(), key=lambda kv: -kv[1][1])[:top]:
        row = [op, count, f"{sec * 1e3:.1f}", f"{sec / total:.1%}", f"{flops / sec / 1e12:.1f}", f"{moved / sec / 1e9:.0f}"]
        if before:
            row.append(f"{old[op][1] * 1e3:.1f}" if op in old else "-")
        rows.append(row)
    head = ["operator", "nodes", "ms", "of kernels", "TFLOP/s", "GB/s"] + (["ms before"] if before else [])
    lines = f"kernels {total * 1e3:.1f} ms per iteration" + (
        f" (before: {sum(v[1] for v in old.values()) * 1e3:.1f})" if before else "")
    return lines + "\n" + tabulate(rows, head)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--before", help="an older profile of the same model, for a 'ms before' column")
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args(argv)
    g = zoo.build(a.model, batch=a.batch, size=a.size)
    try:
        profile = Profile.load(a.profile)
        before = Profile.load(a.before) if a.before else None
    except ProfileError as e:
        print(f"bench.profile_ops: {e}", file=sys.stderr)
        return 2
    print(f"# python -m bench.profile_ops --model {a.model} --batch {a.batch} --size {a.size}: {profile.device}")
    print(table(g, profile, before, a.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
