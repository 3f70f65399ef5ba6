"""Plan-plus-simulate time per candidate at the paper's scale (graphs only, no data).

For each Table 1 model: build the training graph, then time what the genetic search runs for
every candidate, the searched policy (swapadvisor) planning the default order on the simple
allocation (16 GiB, analytic V100 profile) and the simulator: ``ga.fitness.Evaluator.time``.

With ``--against REV`` (a git revision), the planner package as it was at REV runs beside
today's in the same process, alternating, and the table gives both and their ratio; it also
checks the results are identical (the Program's digest and the simulated time). Where REV's
planner has ``final_arrays`` (the search's path since the planner was compiled), its side is
timed on that path too (plan to arrays + simulate), else as plan + simulate of a Program.

With ``--allocator va`` the candidate is planned on the chunked allocation (virtual-addressing
chunks, ``planner.allocation.chunked_allocation``, 2 MiB) instead of the simple one: what the
search's default ``auto`` times beside the pool for every candidate.

    python -m bench.plan_speed [--repeats 3] [--models ...] [--allocator pool|va] [--against REV] [--save]
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import subprocess
import sys
import tarfile
import tempfile
import time

from tabulate import tabulate
from threadpoolctl import threadpool_limits

import zoo
from bench.program_hashes import program_digest
from bench.results_file import cpu_name, save_results
from engine.profile import analytic_profile
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT
from ga.fitness import Evaluator
from planner import policy
from planner.allocation import chunked_allocation, simple_allocation
from allocator.registry import CHUNKED, kinds_for
from planner.budget import make_budget
from planner.facts import GraphFacts
from planner.policies.swapadvisor import CHUNK_BYTES, OPTIONS as options

MODELS = {   # the paper's Table 1 configurations (zoo/stats.py uses the same)
    "wresnet-152-10": 64, "inception-4": 64, "nasnet-25": 64, "rnn-8-8k": 256, "brnn-4-8k": 128,
}


def planner_at(rev: str):
    """The ``planner`` package as it was at git revision ``rev``, imported under another name
    (it shares ``engine``, ``allocator`` and ``ops`` with today's)."""
    root = tempfile.mkdtemp(prefix="planner_at_")
    archive = subprocess.run(["git", "archive", rev, "planner"], capture_output=True, check=True).stdout
    path = os.path.join(root, "archive.tar")
    with open(path, "wb") as f:
        f.write(archive)
    with tarfile.open(path) as tar:
        tar.extractall(root, filter="data")
    name = f"planner_at_{rev.replace('-', '_').replace('~', '_').replace('^', '_')}"
    spec = importlib.util.spec_from_file_location(name, os.path.join(root, "planner", "__init__.py"),
                                                  submodule_search_locations=[os.path.join(root, "planner")])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return (importlib.import_module(f"{name}.swap_planner"), importlib.import_module(f"{name}.simulate"))


def best_of(repeats: int, fn):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.process_time()
        out = fn()
        times.append(time.process_time() - t0)
    return min(times), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget-gib", type=float, default=16)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--allocator", choices=("pool", "va"), default="pool",
                    help="plan on the simple size-class allocation (pool) or on 2 MiB chunks (va)")
    ap.add_argument("--against", metavar="REV", help="also time the planner package as it was at this git revision")
    ap.add_argument("--save", action="store_true", help="write the table to bench/results/plan_speed[_ab]_<date>.txt")
    args = ap.parse_args(argv)
    profile = analytic_profile("v100")
    device_bytes = int(args.budget_gib * 2**30)
    searched = policy.searched()          # swapadvisor: its planner options are the ones compared
    chunked = kinds_for(args.allocator, searched.kinds) == (CHUNKED,)
    old = planner_at(args.against) if args.against else None
    rows = []
    with threadpool_limits(1):
        for name in args.models.split(","):
            g = zoo.build(name, batch=MODELS[name])
            secs = profile.node_seconds(g)
            facts = GraphFacts(g)
            budget = make_budget(facts, device_bytes)
            if chunked:
                alloc = chunked_allocation(facts, budget, CHUNK_BYTES, profile, secs)
            else:
                alloc = simple_allocation(facts, budget, profile, secs)
            evaluator = Evaluator(facts, profile, budget, searched, secs, allocator=args.allocator)
            evaluator.time(facts.order, alloc)          # compiles on first use (cached on disk after)
            new_s, t_new = best_of(args.repeats, lambda: evaluator.time(facts.order, alloc))
            program = evaluator.program(facts.order, alloc)
            row = [name, len(g.nodes), program.count(COMPUTE), program.count(SWAP_IN), program.count(SWAP_OUT),
                   f"{new_s:.4f}", f"{t_new:.3f}"]
            if old is not None:
                old_planner, old_simulate = old
                # An older planner knows fewer options; a Program that uses a newer one will differ.
                known = {f.name for f in dataclasses.fields(old_planner.PlanOptions)}
                old_options = old_planner.PlanOptions(**{k: v for k, v in dataclasses.asdict(options).items()
                                                         if k in known})

                def old_program_and_time():
                    p = old_planner.plan(g, facts.order, alloc, budget.scratch_bytes, profile, secs, old_options)
                    return p, old_simulate.simulate(p, g, profile, secs).total

                def old_arrays_time():
                    final = old_planner.final_arrays(g, facts.order, alloc, profile, secs, old_options)
                    return old_simulate.simulated_seconds(final[0], old_planner.GraphArrays.of(g).tensor_bytes,
                                                          secs, profile)
                if hasattr(old_planner, "final_arrays"):
                    old_s, _ = best_of(args.repeats, old_arrays_time)
                    old_program, t_old = old_program_and_time()
                else:
                    old_s, (old_program, t_old) = best_of(args.repeats, old_program_and_time)
                same = program_digest(old_program) == program_digest(program) and t_old == t_new
                row[5:5] = [f"{old_s:.3f}"]
                row += [f"{old_s / new_s:.1f}x", "identical" if same else "DIFFERENT"]
            rows.append(row)
            print(tabulate([row], disable_numparse=True), flush=True)
    headers = ["model", "nodes", "compute", "swap-in", "swap-out", "per candidate s", "sim s/iter"]
    if old is not None:
        headers[5:6] = [f"at {args.against} s", "now s"]
        headers += ["faster", "results"]
    table = tabulate(rows, headers=headers, disable_numparse=True)
    print(table)
    if args.save:
        cpu = cpu_name()
        head = (f"# python -m bench.plan_speed {' '.join(argv if argv is not None else sys.argv[1:])}   "
                f"({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores: {cpu}; one BLAS thread; CPU seconds of "
                f"one candidate (plan + simulate, the search's Evaluator.time), best of {args.repeats}; "
                f"analytic V100 profile, {args.budget_gib:g} GiB, default order, "
                f"{'2 MiB chunks' if chunked else 'simple allocation'})\n")
        name = "plan_speed" + ("_ab" if old is not None else "") + ("_va" if chunked else "")
        path = save_results(name, head + table + "\n")
        print(f"saved to {path}")


if __name__ == "__main__":
    main()
