"""How far the plans are from what any plan could do: the Table 1 models' lower bounds beside
their ideal, ODSwap and unsearched SwapAdvisor plans, with the stalls of each.

For each model at the paper's configuration (zoo.stats.PAPER), on the analytic V100 profile
with a 16 GiB budget and the default order: the lower bound on an iteration's time and its
parts (planner.bounds), then each plan's simulated seconds, its time over the bound of its
order ("x bound"), its throughput as a fraction of ideal beside the paper's Figure 6, and
where it stalls (planner.stalls). The unlimited plan is bounded without a budget, as it
was planned without one. The plans under the budget keep each tensor in an object of its size
class of the simple allocation; their class bound (``planner.bounds.class_bounds``, at least the
bound) is what no plan on those classes can beat, so "x class bound" is what the planner leaves
unhidden and the gap between the two bounds what the classes cost. A last row per model plans unsearched SwapAdvisor on the order that
runs each update as soon as it can (engine.schedules.updates_when_ready, the search's second
seed), bounded by that order's own bound. Two more plan ODSwap and unsearched SwapAdvisor on MXNet's
default order (engine.schedules.mxnet_order: the order the paper's baselines ran in, which
interleaves an unrolled RNN's layers), bounded by that order's bound.

    python -m bench.plan_quality [--models inception-4,rnn-8-8k] [--budget-gib 16] [--save]
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
from bench.ga_search import PAPER_FIG6
from bench.results_file import Transcript, cpu_name, save_results
from engine.library.planning import plan_quality
from engine.profile import analytic_profile
from engine.schedules import mxnet_order, updates_when_ready
from planner import policy
from planner.allocation import simple_allocation
from planner.bounds import class_bounds, lower_bounds
from allocator.registry import get as allocator_record
from planner.budget import make_budget
from planner.errors import PlanError
from planner.facts import GraphFacts
from planner.simulate import simulate
from planner.verify import verify
from zoo.stats import PAPER

# (row, policy, allocator): swapadvisor unsearched (default order), on its default (auto: the
# pool or va's chunks, the faster) and on the paper's size-class pool alone.
PLANS = (("ideal", "ideal", "pool"), ("odswap", "odswap", "pool"), ("swapadvisor", "swapadvisor", "auto"),
         ("swapadvisor, pool", "swapadvisor", "pool"))
EAGER = "swapadvisor, updates when ready"
# (row, policy, allocator) on MXNet's default order, the paper's (its Figure 6 baselines).
MXNET = (("odswap, MXNet order", "odswap", "pool"), ("swapadvisor, MXNet order", "swapadvisor", "auto"))


def plan_time(name: str, plan_name: str, device_bytes: int = 16 * 2**30, batch: int | None = None) -> float:
    """One plan's simulated seconds (a row of ``PLANS`` or ``MXNET``, on the default or MXNet's
    order) for ``name`` at ``batch`` (the paper's if None), unsearched, on the analytic V100 profile."""
    paper = next((p for p in PAPER if p.model == name), None)
    g = zoo.build(name, batch=batch or (paper.batch if paper else None))
    profile = analytic_profile("v100")
    secs = profile.node_seconds(g)
    row = {r[0]: r for r in PLANS + MXNET}[plan_name]
    facts = GraphFacts(g, mxnet_order(g) if row in MXNET else None)
    p = policy.get(row[1])
    limit = make_budget(facts, device_bytes) if p.needs_budget else None
    program = p.make(policy.PlanRequest(g, facts, limit, profile, secs, allocator=row[2]))
    verify(program, g, limit.device_bytes if limit else None)
    return float(simulate(program, g, profile, secs).total)


def plan_seconds(name: str, plan_name: str) -> str:
    """``plan_time`` at the paper's batch and 16 GiB as the table prints it (bench.committed_tables)."""
    return f"{plan_time(name, plan_name):.3f}"


def machine() -> str:
    """The platform and CPU model, for the results file."""
    return f"{platform.platform()}, {os.cpu_count()} cores: {cpu_name()}"


def plan_rows(name: str, label: str, device_bytes: int, profile, say) -> tuple[list, list]:
    """(the bound row, one row per plan) for one model."""
    paper = next(p for p in PAPER if p.model == name)
    g = zoo.build(name, batch=paper.batch)
    facts = GraphFacts(g)
    secs = profile.node_seconds(g)
    try:
        budget = make_budget(facts, device_bytes)
    except PlanError as e:
        say(f"{label}: {e}")
        return [label] + ["n/a"] * 9, []
    t0 = time.perf_counter()
    b = lower_bounds(GraphFacts(g), budget, profile, secs)     # fresh facts: the order's lifetimes included
    bound_ms = (time.perf_counter() - t0) * 1e3
    sa_paper, od_paper = PAPER_FIG6[name]
    rows, ideal = [], None
    eager = GraphFacts(g, updates_when_ready(g))
    mxnet = GraphFacts(g, mxnet_order(g))
    class_bound = {}        # per order: max(bound, class bounds of its simple allocation)
    for plan_name, policy_name, allocator, plan_facts in ([(*row, facts) for row in PLANS]
                                                          + [(EAGER, "swapadvisor", "auto", eager)]
                                                          + [(*row, mxnet) for row in MXNET]):
        p = policy.get(policy_name)
        limit = budget if p.needs_budget else None
        try:
            program = p.make(policy.PlanRequest(g, plan_facts, limit, profile, secs, allocator=allocator))
            verify(program, g, limit.device_bytes if limit else None)
        except PlanError as e:
            say(f"{label} {plan_name}: {e}")
            continue
        sim = simulate(program, g, profile, secs)
        q = plan_quality(program, sim, plan_facts, limit, profile, secs)
        s = q.stalls
        if limit is not None and id(plan_facts) not in class_bound:
            alloc = simple_allocation(plan_facts, budget, profile, secs)
            class_bound[id(plan_facts)] = max(q.bounds.bound, *class_bounds(plan_facts, alloc, profile, secs))
        # The class bound is the pool's: it does not bound a plan on va's chunks,
        # nor one that recomputes (the class bound is a swap-only bound).
        by_class = (class_bound.get(id(plan_facts)) if limit is not None and not program.arena.virtual
                    and not program.recomputes else None)
        ideal = sim.total if p.unlimited else ideal
        paper_frac = {"odswap": od_paper, "swapadvisor": sa_paper, "swapadvisor, pool": sa_paper,
                      EAGER: sa_paper, MXNET[0][0]: od_paper, MXNET[1][0]: sa_paper}.get(plan_name, "1")
        if allocator_record(allocator).plans_each:
            plan_name += " (va)" if program.arena.virtual else " (pool)"
        # A plan that recomputes is bounded by the bound that allows recomputing (the swap-only bound
        # is not a bound for it: NasNet-25's swapadvisor ran at 0.27 of it).
        bound = q.bounds.recompute_bound if program.recomputes else q.bounds.bound
        rows.append([label, plan_name, f"{sim.total:.3f}", f"{sim.total / bound:.2f}",
                     f"{sim.total / by_class:.2f}" if by_class else "-",
                     f"{ideal / sim.total:.3f}" if ideal else "n/a", paper_frac,
                     f"{s.compute_idle_s:.3f}", f"{s.copy_compute_overlap_s:.3f}", f"{s.both_directions_s:.3f}",
                     f"{s.swap_ins_held_by_swap_out}/{s.swap_ins} ({s.held_fraction:.2f})",
                     f"{s.compute_wait_on_swap_in_s:.3f}"])
    bound_row = [label, f"{ideal:.3f}" if ideal else "n/a", f"{b.compute_s:.3f}", f"{b.peak_s:.3f}",
                 f"{b.persistent_s:.3f}", f"{b.split_s:.3f}",
                 g.nodes[facts.order[b.split_step]].name if b.split_step >= 0 else "-",
                 f"{b.two_split_s:.3f}", f"{b.bound:.3f}", f"{bound_ms:.0f}",
                 f"{class_bound[id(facts)]:.3f}" if id(facts) in class_bound else "n/a"]
    return bound_row, rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.plan_quality", description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(p.model for p in PAPER),
                    help="comma-separated Table 1 models (default: all five)")
    ap.add_argument("--budget-gib", type=float, default=16)
    ap.add_argument("--save", action="store_true", help="also write bench/results/plan_quality_<date>.txt")
    args = ap.parse_args(argv)
    papers = {p.model: p for p in PAPER}
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in papers]
    if unknown or not models:
        ap.error(f"unknown model {unknown[0] if unknown else '(none)'}; choose from {', '.join(papers)}")
    profile = analytic_profile("v100")
    device_bytes = int(args.budget_gib * 2**30)
    started = time.perf_counter()
    say = Transcript()

    say(f"# python -m bench.plan_quality {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip())
    say(f"# {datetime.datetime.now():%Y-%m-%d %H:%M}, {machine()}")
    say(f"# analytic V100 profile, {args.budget_gib:g} GiB budget, default (insertion) order unless a row "
        "names MXNet's, paper batches, no search")
    bound_rows, rows = [], []
    for name in models:
        bound_row, plan_rows_ = plan_rows(name, papers[name].label, device_bytes, profile, say)
        bound_rows.append(bound_row)
        rows += plan_rows_
        print(f"  [{papers[name].label} done, {time.perf_counter() - started:.0f} s so far]", file=sys.stderr)
    say()
    say("Lower bounds on one iteration (seconds; planner.bounds)")
    say(tabulate(bound_rows, headers=["model", "ideal", "compute", "peak", "persistent", "split",
                                      "split at", "two splits", "bound", "bound ms", "class bound"],
                     disable_numparse=True))
    say("compute: every operator once; peak: the bytes over the pool at the worst step, each crossing "
        "the link once or twice; persistent: state and batch that cannot stay resident; split: copies "
        "before and after the worst step beside the compute on each side; two splits: the compute plus "
        "the copies out forced at one step that compute before it cannot hide and the copies in forced "
        "at a later step that compute after it cannot hide. bound: the largest. bound ms: time to "
        "compute them (the order's lifetimes included, op times not). class bound: the least any plan "
        "that keeps each tensor in its size class of the simple allocation can take (at least the bound).")
    say()
    say("Plans: simulated seconds, over the bound (x bound), as a fraction of ideal, and stalls (seconds)")
    say(tabulate(rows, headers=["model", "plan", "seconds", "x bound", "x class bound", "frac ideal", "paper frac",
                                "compute idle", "copy+compute", "both dirs", "held swap-ins", "wait on in"],
                 disable_numparse=True))
    say("swapadvisor: unsearched (default order) on its default allocator, auto: the simple size-class "
        "allocation (pool) or va's chunks (the chunked allocation, 2 MiB chunks), whichever simulates faster "
        "(which, in brackets); 'pool': on the simple allocation alone (the paper's); 'updates when ready': "
        "auto on that order; 'MXNet order': on engine.schedules.mxnet_order, the order MXNet's executor "
        "runs (the paper's baselines ran in it; its swapadvisor row is the paper's allocation-only start). "
        "x bound: seconds over the bound of "
        "the plan's order under the budget it was planned for (the bound allowing recomputation for a plan "
        "that recomputes; ideal: none); x class bound: over the class "
        "bound of that order and its simple allocation (plans on the pool only). copy+compute: time a "
        "byte-moving copy and a compute both run; both dirs: a swap-in and a swap-out both move bytes; "
        "held swap-ins: started when a write-back of their object finished; wait on in: compute idle "
        "gaps ended by a swap-in.")
    say()
    say(f"total {time.perf_counter() - started:.0f} s")
    if args.save:
        print(f"saved {save_results('plan_quality', say.text())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
