"""`python -m engine.train`: build a model, train it, and print a throughput report.

This module is the run's order of events; the flags are in engine/train_args.py, the
backend choice and what is made on it in engine/train_backend.py, and the planning in
engine/train_plan.py. Bad flags or values get one line on stderr and exit status 2;
Ctrl-C saves a checkpoint (when --checkpoint is given) before stopping.
"""
from __future__ import annotations

import json
import os
import statistics
import sys

import numpy as np
from tqdm import tqdm

from ga.checkpoint import CheckpointError as SearchCheckpointError
from planner.swap_planner import PlanError
from planner.verify import VerificationError

from .backends.cuda import CudaUnavailable
from .data import TeacherData
from .ir import Graph, GraphError, Kind
from .liveness import peak_bytes
from .profile import DEVICES, ProfileError
from .program import SWAP_IN, SWAP_OUT, ProgramFormatError
from .report import PolicyRow, policy_table, rows_to_json
from .train_args import PROG, UsageError, parser
from .train_backend import BackendChoice, choose_backend, make_runner, unlimited_runner
from .train_plan import (
    batch_of,
    build_model,
    choose_budget,
    choose_profile,
    plan_policies,
)
from .training import CheckpointError, Trainer
from .units import format_bytes

__all__ = ["UsageError", "main", "parser"]


def smoothed(losses: list[float]) -> float:
    return float(np.mean(losses))


def loss_ends(losses: list[float]) -> tuple[float, float, int]:
    """(mean of the first k, mean of the last k, k): k is 10, or half the run when shorter,
    so the two means never share an iteration (k = 1 for a single iteration)."""
    k = max(1, min(10, len(losses) // 2))
    return smoothed(losses[:k]), smoothed(losses[-k:]), k


def time_policy(policy, programs, g, args, choice: BackendChoice) -> float:
    """Median seconds per iteration over --measure-iterations, after one warm-up iteration."""
    runner, backend = make_runner(policy, programs, g, choice, args.sanitize, args.seed)
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


def train_policy(policy, programs, g, args, choice: BackendChoice):
    """Train with the last policy; return (trainer, final state, losses, seconds per iteration,
    first iteration), or None if interrupted."""
    runner, backend = make_runner(policy, programs, g, choice, args.sanitize, args.seed)
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


def identical_to_unlimited(g: Graph, args, choice: BackendChoice, programs: dict, final_state) -> bool:
    """Train the unlimited-memory run on the same backend over the same iterations; compare bit
    for bit."""
    runner, backend = unlimited_runner(choice, g, programs)
    try:
        ref = Trainer(g, seed=args.seed, runner=runner, data=args.data)
        if args.resume:
            ref.load(args.resume)
        while ref.iteration < args.iterations:
            ref.step()
        state = ref.state
    finally:
        if backend:
            backend.close()
    return all(np.array_equal(a, final_state[t]) for t, a in state.items())


def policy_rows(args, g: Graph, programs: dict, measured: dict | None = None) -> list[PolicyRow]:
    return [PolicyRow(p, programs[p][1].total, measured[p] if measured else None, batch_of(g),
                      programs[p][0].bytes_moved(g, SWAP_IN), programs[p][0].bytes_moved(g, SWAP_OUT),
                      programs[p][0].pool.arena_bytes, len(programs[p][0].instrs))
            for p in args.policy if p in programs]


def check_input_files(args) -> None:
    """Files the run will read must exist before anything is built, planned or measured."""
    if args.resume and not os.path.isfile(args.resume):
        raise UsageError(f"checkpoint '{args.resume}' does not exist")
    if args.load_plan and not os.path.isfile(args.load_plan):
        raise UsageError(f"plan file '{args.load_plan}' does not exist")
    if args.profile and args.profile.lower() not in DEVICES and not os.path.isfile(args.profile):
        raise UsageError(f"--profile {args.profile}: neither a device with an analytic profile "
                         f"({', '.join(DEVICES)}) nor a profile file")


def train(args) -> int:
    check_input_files(args)
    choice = None if args.simulate_only else choose_backend(args)      # nothing runs when simulating
    if choice:
        print(choice.announcement())
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
    profile = choose_profile(args, g, choice) if budget else None
    if profile and args.save_profile:
        profile.save(args.save_profile)
        print(f"profile saved to {args.save_profile}")
    out_dir = args.out or os.path.join("runs", g.name)
    programs = plan_policies(args, g, budget, profile, out_dir) if budget else {}
    figures = {"model": g.name, "budget": budget}
    if args.simulate_only:
        rows = policy_rows(args, g, programs)
        print(policy_table(rows))
        save_artifacts(args, g, programs, out_dir)
        return write_json(args, {**figures, "backend": None, "policies": rows_to_json(rows)})
    *others, last = args.policy
    measured = {p: time_policy(p, programs, g, args, choice) for p in others}
    result = train_policy(last, programs, g, args, choice)
    if result is None:
        return 130
    trainer, final_state, losses, times, start = result
    if not losses:
        print(f"nothing to do: the checkpoint is already at iteration {start} >= --iterations")
        return 0
    measured[last] = statistics.median(times[1:] or times)
    rows = policy_rows(args, g, programs, measured)
    if rows:
        print(f"backend {choice.describe()}")
        print(policy_table(rows))
    first, final, k = loss_ends(losses)
    print(f"train  {len(losses)} iterations with {last}: loss {first:.3f} -> {final:.3f} (means of the "
          f"first and last {k}), {statistics.median(times):.4f} s/iter")
    same = None
    if not args.no_check and last != "reference":
        same = identical_to_unlimited(g, args, choice, programs, final_state)
        print(f"parameters identical to the unlimited run: {'yes (bit for bit)' if same else 'NO'}")
    if args.checkpoint:
        print(f"checkpoint saved to {args.checkpoint} (iteration {trainer.iteration})")
    save_artifacts(args, g, programs, out_dir)
    status = write_json(args, {**figures, **choice.to_json(), "iterations": len(losses),
                               "loss_first": first, "loss_last": final,
                               "identical": same, "policies": rows_to_json(rows)})
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
            VerificationError, SearchCheckpointError, CudaUnavailable) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:       # before training started: nothing to save
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
