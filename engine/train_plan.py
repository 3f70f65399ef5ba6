"""From flags to verified Programs for `python -m engine.train`: the model, the budget,
the profile, and each policy's plan (searched, loaded or made), simulated.

Nothing here executes a Program; only the default profile is measured, on the backend
that will run (engine/train_backend.py).
"""
from __future__ import annotations

import json
import os
import time

from planner.allocation import check_budget, size_demand, smallest_budget
from planner.baselines import make_program
from planner.simulate import simulate
from planner.verify import verify

from .autodiff import SGD
from .ir import Graph, Kind
from .profile import DEVICES, Profile, analytic_profile
from .program import Program
from .train_args import UsageError
from .train_backend import BackendChoice, measure_profile

SMALL_MODELS = ("small-cnn", "small-lstm")


def build_model(args) -> Graph:
    sgd = SGD(lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    name = args.model.lower()
    if name in SMALL_MODELS:
        from zoo import small

        kw = {"dtype": args.dtype, "sgd": sgd}
        if args.batch:
            kw["batch"] = args.batch
        if name == "small-cnn":
            return small.residual_cnn(**({"image": args.size} if args.size else {}), **kw)
        return small.lstm(**({"steps": args.size} if args.size else {}), **kw)
    import zoo

    try:
        return zoo.build(name, batch=args.batch, size=args.size, dtype=args.dtype, sgd=sgd)
    except ValueError as e:
        raise UsageError(f"--model {args.model}: {e}") from None


def batch_of(g: Graph) -> int:
    return next((g.tensors[t].shape[0] for t in g.leaves(Kind.INPUT)), 0)


def choose_profile(args, g: Graph, choice: BackendChoice | None) -> Profile:
    """--profile (a device name or a file), else analytic v100 with --simulate-only, else
    measured on the chosen backend."""
    if args.profile:
        if args.profile.lower() in DEVICES:
            return analytic_profile(args.profile)
        return Profile.load(args.profile)
    if args.simulate_only:
        return analytic_profile("v100")
    return measure_profile(choice, g, args.seed, args.data)


def choose_budget(args, g: Graph, peak: int) -> int:
    smallest = smallest_budget(size_demand(g, g.default_order()))
    if args.memory is not None:
        check_budget(g, size_demand(g, g.default_order()), args.memory)
        return args.memory
    return max(smallest, int(0.3 * peak))


def load_plan(path: str, g: Graph) -> Program:
    try:
        with open(path) as f:
            program = Program.from_dict(json.load(f))
    except FileNotFoundError:
        raise UsageError(f"plan file '{path}' does not exist") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"plan file '{path}' is not valid JSON ({e})") from None
    if program.graph_fingerprint != g.fingerprint():
        raise UsageError(f"plan file '{path}' was made for another graph ('{program.graph_name}' with other "
                         "shapes or structure); use the same --model, --batch, --size and --dtype")
    return program


def searched_program(args, g: Graph, budget: int, profile: Profile, secs, out_dir: str) -> Program:
    """The swapadvisor Program: loaded, or searched (schedule and allocation), or unsearched."""
    link = profile.link.h2d_bytes_per_s
    if args.load_plan:
        return load_plan(args.load_plan, g)
    if not args.search_seconds and not args.search_generations:
        return make_program("swapadvisor", g, budget, secs, link)
    from ga.search import SearchOptions, search

    opts = SearchOptions(population=args.population, seed=args.seed, workers=args.workers,
                         time_limit_s=args.search_seconds or None, max_generations=args.search_generations,
                         checkpoint=args.search_checkpoint, resume=args.resume_search, progress=not args.quiet)
    result = search(g, budget, profile, opts)
    os.makedirs(out_dir, exist_ok=True)
    result.write_history(os.path.join(out_dir, "search.csv"))
    plotted = result.plot(os.path.join(out_dir, "search.png"), title=g.name)
    initial = f"{result.initial_time:.4f}" if result.initial_time is not None else "does not fit"
    print(f"search {result.generations} generations, {result.evaluations} candidates in "
          f"{result.elapsed_s:.1f} s ({result.stopped}): best simulated {result.best_time:.4f} s/iter, "
          f"default order with the simple allocation {initial}; log {out_dir}/search.csv"
          + (" and search.png" if plotted else ""))
    return make_program("swapadvisor", g, budget, secs, link, schedule=result.best_schedule,
                        allocation=result.best_allocation)


def plan_policies(args, g: Graph, budget: int, profile: Profile, out_dir: str) -> dict:
    """{policy: (Program, simulated Timeline)} for every policy but reference, each verified."""
    secs = profile.node_seconds(g)
    programs = {}
    for policy in args.policy:
        if policy == "reference":
            continue
        t0 = time.perf_counter()
        if policy == "swapadvisor":
            program = searched_program(args, g, budget, profile, secs, out_dir)
        else:
            program = make_program(policy, g, None if policy == "ideal" else budget, secs,
                                   profile.link.h2d_bytes_per_s)
        verify(program, g, None if policy == "ideal" else budget)
        sim = simulate(program, g, profile, secs)
        print(f"plan   {policy:12s} {len(program.instrs)} instructions, verified, simulated "
              f"{sim.total:.4f} s/iter ({time.perf_counter() - t0:.2f} s to plan)", flush=True)
        programs[policy] = (program, sim)
    return programs
