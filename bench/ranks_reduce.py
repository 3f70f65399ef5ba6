"""The cost of the exact reduction (issue 41): all-gather then add in rank order on every rank
(engine/library/ray_ranks.py) beside gloo's own all-reduce, on a local Ray, for a few bucket
sizes; and whether their bits agree.

Each size is reduced ``--repeats`` times after one warm-up; the medians of wall time (the
collective waits on the other ranks, so CPU time alone misses it) and of the rank's CPU time.

    python -m bench.ranks_reduce [--ranks 2] [--save]
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import time

import numpy as np

from engine.library.ranks import rank_order_sum

from .results_file import cpu_name, save_results

SIZES = (32 * 2**10, 2**20, 16 * 2**20)      # float32 bytes: small-cnn's gradients are ~26 KiB


class Reducer:
    def __init__(self, world: int, rank: int, group: str):
        import ray.util.collective as col

        self.col, self.world, self.rank, self.group = col, world, rank, group
        col.init_collective_group(world, rank, backend="gloo", group_name=group)

    def run(self, nbytes: int, repeats: int) -> dict:
        col, world = self.col, self.world
        x = np.random.default_rng([self.rank, nbytes]).standard_normal(nbytes // 4).astype(np.float32)
        out = {}
        for name in ("exact", "gloo"):
            walls, cpus = [], []
            for k in range(repeats + 1):
                w, c = time.perf_counter(), time.process_time()
                if name == "exact":
                    parts = [np.empty_like(x) for _ in range(world)]
                    col.allgather(parts, x, group_name=self.group)
                    y = rank_order_sum(parts)
                else:
                    y = x.copy()
                    col.allreduce(y, group_name=self.group)
                if k:
                    walls.append(time.perf_counter() - w)
                    cpus.append(time.process_time() - c)
            out[name] = (float(np.median(walls)), float(np.median(cpus)), y)
        same = bool(np.array_equal(out["exact"][2], out["gloo"][2]))
        return {"exact": out["exact"][:2], "gloo": out["gloo"][:2], "same_bits": same}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--save", action="store_true")
    a = p.parse_args(argv)
    import ray

    ray.init(num_cpus=a.ranks, object_store_memory=96 * 2**20, include_dashboard=False, log_to_driver=False)
    try:
        remote = ray.remote(num_cpus=1)(Reducer)
        group = f"bench-{os.getpid()}"
        actors = [remote.remote(a.ranks, r, group) for r in range(a.ranks)]
        lines = [f"bench.ranks_reduce: {a.ranks} ranks on a local Ray (ray.util.collective, gloo = torch.distributed), "
                 f"float32 buckets, median of {a.repeats} after a warm-up",
                 f"machine: {platform.platform()}, {os.cpu_count()} cores: {cpu_name()}; "
                 f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d')} (shared with other work)",
                 f"{'bucket':>10} {'exact wall ms':>14} {'exact cpu ms':>13} {'gloo wall ms':>13} {'gloo cpu ms':>12} "
                 f"{'exact/gloo wall':>16} {'same bits':>9}"]
        for nbytes in SIZES:
            results = ray.get([x.run.remote(nbytes, a.repeats) for x in actors])
            r0 = results[0]
            (ew, ec), (gw, gc) = r0["exact"], r0["gloo"]
            lines.append(f"{nbytes // 1024:>8}Ki {ew * 1e3:>14.2f} {ec * 1e3:>13.2f} {gw * 1e3:>13.2f} "
                         f"{gc * 1e3:>12.2f} "
                         f"{ew / gw:>16.2f} {str(all(r['same_bits'] for r in results)):>9}")
        text = "\n".join(lines) + "\n"
        print(text, end="")
        if a.save:
            print(f"saved to {save_results(f'ranks_reduce_{a.ranks}', text)}")
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
