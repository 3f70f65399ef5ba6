"""`python -m engine.train`: build a model, train it, and print a throughput report.

Bad flags or values get one line on stderr and exit status 2; Ctrl-C saves a
checkpoint (when --checkpoint is given) before stopping.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
from tqdm import tqdm

from ga.checkpoint import CheckpointError as SearchCheckpointError
from planner.allocation import check_budget, size_demand, smallest_budget
from planner.baselines import POLICIES, make_program
from planner.simulate import simulate
from planner.swap_planner import PlanError
from planner.verify import VerificationError, verify

from .autodiff import SGD
from .backends.cpu import CpuBackend, EmulatedLink
from .backends.detect import detect_gpu
from .data import TeacherData
from .executor import ProgramExecutor
from .ir import Graph, GraphError, Kind
from .liveness import peak_bytes
from .profile import DEVICES, Profile, ProfileError, analytic_profile
from .profiling import measure_cpu_profile
from .program import SWAP_IN, SWAP_OUT, Program, ProgramFormatError
from .report import PolicyRow, policy_table, rows_to_json
from .training import CheckpointError, ReferenceRunner, Trainer
from .units import format_bytes, parse_bytes

PROG = "engine.train"
SMALL_MODELS = ("small-cnn", "small-lstm")


class UsageError(Exception):
    """A bad flag or value: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see --help)")


def _number(kind, text: str, what: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not {what}") from None


def positive_int(text: str) -> int:
    v = _number(int, text, "an integer")
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {v}")
    return v


def positive_float(text: str) -> float:
    v = _number(float, text, "a number")
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return v


def nonnegative_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0 <= v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a non-negative number, got '{text}'")
    return v


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=f"python -m {PROG}", description="Train a model on synthetic data and report throughput.")
    p.add_argument("--model", default="small-cnn",
                   help="small-cnn, small-lstm, or a zoo model: wresnet-D-X, inception-X, nasnet-R, "
                        "rnn-L-XK, brnn-L-XK, resnet-D (default: small-cnn)")
    p.add_argument("--batch", type=positive_int, default=None, help="batch size (default: the model's own)")
    p.add_argument("--size", type=positive_int, default=None,
                   help="image side for CNNs, sequence length for RNNs (default: the model's own)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="tensor dtype")
    p.add_argument("--iterations", type=positive_int, default=150, help="training iterations (default 150)")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial weights and the data (default 0)")
    p.add_argument("--lr", type=positive_float, default=0.05, help="SGD learning rate (default 0.05)")
    p.add_argument("--momentum", type=nonnegative_float, default=0.9, help="SGD momentum (default 0.9)")
    p.add_argument("--weight-decay", type=nonnegative_float, default=1e-4, help="weight decay (default 1e-4)")
    p.add_argument("--checkpoint", metavar="FILE", help="save parameters and optimizer state here (npz)")
    p.add_argument("--checkpoint-every", type=positive_int, default=50, metavar="N",
                   help="with --checkpoint: save every N iterations, and always at exit (default 50)")
    p.add_argument("--resume", metavar="FILE", help="continue from this checkpoint, bit-identically")
    p.add_argument("--memory", metavar="SIZE", type=_size, default=None,
                   help="device memory budget for the tensor pool, in binary units (e.g. 64MiB, 16GiB); "
                        "default: 0.3 of the unlimited-memory peak, or the smallest budget that runs")
    p.add_argument("--policy", type=_policies, default=list(POLICIES), metavar="P[,P...]",
                   help=f"swap policies to compare, from {', '.join(POLICIES)} and reference (numpy, no "
                        "budget); the last one trains for --iterations, the others are timed on "
                        "--measure-iterations (default: all three)")
    p.add_argument("--measure-iterations", type=positive_int, default=3, metavar="N",
                   help="timed iterations for each policy but the last (default 3)")
    p.add_argument("--profile", metavar="DEVICE|FILE",
                   help="profile driving the planner and simulator: a device name (v100, h100) for an "
                        "analytic one, or a profile JSON file; default: measured here (v100 with "
                        "--simulate-only)")
    p.add_argument("--save-profile", metavar="FILE",
                   help="write the profile used (measured or analytic) as JSON, for --profile FILE later")
    p.add_argument("--search-seconds", type=nonnegative_float, default=10.0, metavar="S",
                   help="genetic search for the swapadvisor policy: seconds to search schedules and "
                        "allocations (default 10; 0: no search, the default order and a simple allocation)")
    p.add_argument("--search-generations", type=positive_int, default=None, metavar="N",
                   help="stop the search after N generations (with or without --search-seconds)")
    p.add_argument("--population", type=positive_int, default=144, help="search population (default 144)")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="search worker processes (default: all cores)")
    p.add_argument("--search-checkpoint", metavar="FILE",
                   help="save the search's population here every generation; with --resume-search, "
                        "continue from it")
    p.add_argument("--resume-search", action="store_true", help="continue the search from --search-checkpoint")
    p.add_argument("--save-plan", metavar="FILE", help="also save the swapadvisor Program (JSON) here")
    p.add_argument("--load-plan", metavar="FILE",
                   help="run this saved swapadvisor Program instead of planning (it is verified first)")
    p.add_argument("--simulate-only", action="store_true",
                   help="plan and simulate without executing (graphs of any size, no data allocated)")
    p.add_argument("--link-gbps", type=positive_float, default=2.0,
                   help="emulated host-device link of the cpu backend, GB/s one way (default 2; "
                        "both ways together get 1.6x that)")
    p.add_argument("--sanitize", action="store_true",
                   help="poison freed memory and add random delays to every stream (catches races)")
    p.add_argument("--no-check", action="store_true",
                   help="skip comparing the trained parameters with an unlimited-memory reference run")
    p.add_argument("--out", metavar="DIR", help="where plan.json and trace.json go (default runs/<model>)")
    p.add_argument("--json", metavar="FILE", help="also write the report's figures to this JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _size(text: str) -> int:
    try:
        return parse_bytes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _policies(text: str) -> list[str]:
    names = [x.strip().lower() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in POLICIES + ("reference",)]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown policy '{bad[0] if bad else text}' "
                                         f"(choose from {', '.join(POLICIES)}, reference)")
    return names


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


def smoothed(losses: list[float]) -> float:
    return float(np.mean(losses))


def batch_of(g: Graph) -> int:
    return next((g.tensors[t].shape[0] for t in g.leaves(Kind.INPUT)), 0)


def choose_profile(args, g: Graph, link: EmulatedLink) -> Profile:
    if args.profile:
        if args.profile.lower() in DEVICES:
            return analytic_profile(args.profile)
        return Profile.load(args.profile)
    if args.simulate_only:
        return analytic_profile("v100")
    print("profiling operators on this machine ...", flush=True)
    return measure_cpu_profile(g, make_program("ideal", g, None), link, args.seed, data=args.data)


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


def make_runner(policy: str, programs: dict, g: Graph, args, link: EmulatedLink):
    if policy == "reference":
        return ReferenceRunner(g), None
    backend = CpuBackend(link, sanitize=args.sanitize, seed=args.seed)
    return ProgramExecutor(programs[policy][0], g, backend), backend


def time_policy(policy, programs, g, args, link) -> float:
    """Median seconds per iteration over --measure-iterations, after one warm-up iteration."""
    runner, backend = make_runner(policy, programs, g, args, link)
    try:
        tr = Trainer(g, seed=args.seed, runner=runner, data=args.data)
        tr.step()
        times = []
        for _ in range(args.measure_iterations):
            tr.step()
            times.append(tr.step_seconds)
        return statistics.median(times)
    finally:
        if backend:
            backend.close()


def train_policy(policy, programs, g, args, link):
    """Train with the last policy; return (trainer, final state, losses, seconds per iteration,
    first iteration), or None if interrupted."""
    runner, backend = make_runner(policy, programs, g, args, link)
    try:
        trainer = Trainer(g, seed=args.seed, runner=runner, data=args.data)
        if args.resume:
            trainer.load(args.resume)
        start = trainer.iteration
        todo = max(0, args.iterations - start)
        if args.resume:
            print(f"resumed from {args.resume} at iteration {start}; {todo} to go")
        losses, times = [], []
        bar = tqdm(total=todo, desc="train", unit="it", disable=args.quiet, file=sys.stderr)
        try:
            while trainer.iteration < args.iterations:
                losses.append(trainer.step())
                times.append(trainer.step_seconds)
                bar.update(1)
                bar.set_postfix_str(f"loss {smoothed(losses[:10]):.3f} -> {smoothed(losses[-10:]):.3f}")
                if args.checkpoint and trainer.iteration % args.checkpoint_every == 0:
                    trainer.save(args.checkpoint)
        except KeyboardInterrupt:
            bar.close()
            if args.checkpoint:
                trainer.save(args.checkpoint)
                print(f"interrupted at iteration {trainer.iteration}; checkpoint saved to {args.checkpoint}")
            else:
                print(f"interrupted at iteration {trainer.iteration} (no --checkpoint given, nothing saved)")
            return None
        bar.close()
        if args.checkpoint:
            trainer.save(args.checkpoint)
        return trainer, trainer.state, losses, times, start
    finally:
        if backend:
            backend.close()


def identical_to_reference(g: Graph, args, final_state) -> bool:
    """Train the numpy reference with unlimited memory over the same iterations; compare bit for bit."""
    ref = Trainer(g, seed=args.seed, data=args.data)
    if args.resume:
        ref.load(args.resume)
    while ref.iteration < args.iterations:
        ref.step()
    return all(np.array_equal(a, final_state[t]) for t, a in ref.state.items())


def train(args) -> int:
    if args.resume and not os.path.isfile(args.resume):
        raise UsageError(f"checkpoint '{args.resume}' does not exist")
    count, reason = detect_gpu()
    link = EmulatedLink(args.link_gbps * 1e9, args.link_gbps * 1e9, 1.6 * args.link_gbps * 1e9)
    if not args.simulate_only:
        why = "CUDA backend not built yet" if count else f"no GPU found ({reason})"
        print(f"engine: {why}; running on the cpu backend with an emulated {args.link_gbps:g} GB/s link")
    g = build_model(args)
    args.data = None if args.simulate_only else TeacherData(g, args.seed)   # made once, shared by every run
    s = g.summary()
    peak = peak_bytes(g)
    print(f"model {g.name}, batch {batch_of(g)}, {g.tensors[g.leaves(Kind.INPUT)[0]].dtype}: {s.operators} "
          f"operators, {s.distinct_sizes} distinct tensor sizes, "
          f"{format_bytes(s.bytes_by_kind['parameter'] // 2)} parameters")
    if args.simulate_only and "reference" in args.policy:
        raise UsageError("--simulate-only cannot run the reference policy; choose ideal, odswap, swapadvisor")
    budget = choose_budget(args, g, peak) if args.policy != ["reference"] else None
    if budget:
        print(f"unlimited-memory peak {format_bytes(peak)}; budget {format_bytes(budget)} "
              f"({budget / peak:.2f} of peak)")
    profile = choose_profile(args, g, link) if budget else None
    if profile and args.save_profile:
        profile.save(args.save_profile)
        print(f"profile saved to {args.save_profile}")
    out_dir = args.out or os.path.join("runs", g.name)
    programs = plan_policies(args, g, budget, profile, out_dir) if budget else {}
    rows = []
    if args.simulate_only:
        rows = [PolicyRow(p, sim.total, None, batch_of(g), prog.bytes_moved(g, SWAP_IN),
                          prog.bytes_moved(g, SWAP_OUT), prog.pool.arena_bytes, len(prog.instrs))
                for p, (prog, sim) in programs.items()]
        print(policy_table(rows))
        save_artifacts(args, g, programs, out_dir)
        return write_json(args, {"model": g.name, "budget": budget, "policies": rows_to_json(rows)})
    *others, last = args.policy
    measured = {p: time_policy(p, programs, g, args, link) for p in others}
    result = train_policy(last, programs, g, args, link)
    if result is None:
        return 130
    trainer, final_state, losses, times, start = result
    if not losses:
        print(f"nothing to do: the checkpoint is already at iteration {start} >= --iterations")
        return 0
    measured[last] = statistics.median(times[1:] or times)
    for p in args.policy:
        if p == "reference":
            continue
        prog, sim = programs[p]
        rows.append(PolicyRow(p, sim.total, measured[p], batch_of(g), prog.bytes_moved(g, SWAP_IN),
                              prog.bytes_moved(g, SWAP_OUT), prog.pool.arena_bytes, len(prog.instrs)))
    if rows:
        print(policy_table(rows))
    print(f"train  {len(losses)} iterations with {last}: loss {smoothed(losses[:10]):.3f} -> "
          f"{smoothed(losses[-10:]):.3f} (means of the first and last 10), "
          f"{statistics.median(times):.4f} s/iter")
    same = None
    if not args.no_check and last != "reference":
        same = identical_to_reference(g, args, final_state)
        print(f"parameters identical to the unlimited run: {'yes (bit for bit)' if same else 'NO'}")
    if args.checkpoint:
        print(f"checkpoint saved to {args.checkpoint} (iteration {trainer.iteration})")
    save_artifacts(args, g, programs, out_dir)
    status = write_json(args, {"model": g.name, "budget": budget, "iterations": len(losses),
                               "loss_first": smoothed(losses[:10]), "loss_last": smoothed(losses[-10:]),
                               "identical": same,
                               "policies": rows_to_json(rows)})
    return 1 if same is False else status


def save_artifacts(args, g: Graph, programs: dict, out_dir: str) -> None:
    if not programs:
        return
    policy = [p for p in args.policy if p in programs][-1]
    program, sim = programs[policy]
    os.makedirs(out_dir, exist_ok=True)
    plan_path, trace_path = os.path.join(out_dir, "plan.json"), os.path.join(out_dir, "trace.json")
    with open(plan_path, "w") as f:
        json.dump(program.to_dict(), f)
    with open(trace_path, "w") as f:
        json.dump(sim.to_chrome_trace(program, g), f)
    print(f"plan ({policy}) saved to {plan_path}; simulated trace: {trace_path} (open in Perfetto)")
    if args.save_plan and "swapadvisor" in programs:
        with open(args.save_plan, "w") as f:
            json.dump(programs["swapadvisor"][0].to_dict(), f)
        print(f"swapadvisor plan saved to {args.save_plan}")


def write_json(args, figures: dict) -> int:
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return 0


def main(argv=None) -> int:
    try:
        return train(parser().parse_args(argv))
    except (UsageError, GraphError, CheckpointError, PlanError, ProfileError, ProgramFormatError,
            VerificationError, SearchCheckpointError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:       # before training started: nothing to save
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
