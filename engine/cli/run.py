"""`python -m engine.train`: build a model, plan it under a budget, train it, print a report.

This module is the run's order of events; the flags are in ``flags.py``, the frozen
configuration in ``config.py``, the planning in ``plans.py`` and what runs each policy in
``engine/library/runners.py``. Any ``EngineError`` (bad flags or values, a budget too small, a malformed
file, no GPU) becomes one line on stderr and exit status 2; Ctrl-C saves a checkpoint (when
--checkpoint is given) before stopping.
"""
from __future__ import annotations

import json
import math
import os
import statistics
import sys
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from planner.facts import GraphFacts
from planner.policy import REGISTRY as POLICIES
from planner.policy import Policy

from .. import backend_registry
from ..backend_registry import Placement
from ..checkpoint import write_atomically
from ..data import TeacherData
from ..errors import EngineError
from ..interrupts import StopAtBoundary
from ..ir import Graph, Kind
from ..program import SWAP_IN, SWAP_OUT
from ..report import PolicyRow, policy_table, rows_to_json
from ..timing_trust import HostLoad, load_average, spread, timing_warnings
from ..training import Trainer
from ..units import format_bytes
from . import first_run
from . import ranks as data_parallel
from .config import RunConfig
from .flags import PROG, UsageError, parser
from .command import Parsed, run_command
from .report_json import JsonReport
from .settings import settings_of
from .preflight import (JsonTaken, check_flags, check_host_memory, check_inputs, check_outputs, check_resume_fits,
                        check_search_size, check_unused, unused_settings)
from .config_file import with_config
from .run_folder import STEPS_FILE, StepRecords, check_out, make_run_folder
from .user_files import check_user_files, data_for, save_weights
from .plans import (assess_plans, batch_of, build_model, choose_budget, choose_profile, describe_profile,
                    grow_default_budget, plan_policies, profile_source)
from ..library.runners import device_name, make_runner, unlimited_runner

__all__ = ["UsageError", "main", "parser"]


@dataclass
class Run:
    """What one run made: the model and its facts, where it runs, its data and its plans."""
    cfg: RunConfig
    facts: GraphFacts
    placement: Placement | None        # None with --simulate-only: nothing runs
    data: TeacherData | None           # or the user's (engine/user_data.ArrayData, --data)
    programs: dict = field(default_factory=dict)
    quality: dict = field(default_factory=dict)     # policy name -> plans.PlanQuality
    device_name: str = ""              # known once a backend has been made
    folder: str = ""                   # the run's own folder (engine/cli/run_folder.py)

    @property
    def graph(self) -> Graph:
        return self.facts.graph

    def runner(self, policy: Policy):
        made = make_runner(policy, self.programs, self.graph, self.placement, self.cfg.sanitize, self.cfg.seed)
        self.device_name = self.device_name or device_name(made.backend)
        return made

    def trainer(self, runner) -> Trainer:
        return Trainer(self.graph, seed=self.cfg.seed, runner=runner, data=self.data)


def smoothed(losses: list[float]) -> float:
    return float(np.mean(losses))


def loss_ends(losses: list[float]) -> tuple[float, float, int]:
    """(mean of the first k, mean of the last k, k): k is 10, or half the run when shorter,
    so the two means never share an iteration (k = 1 for a single iteration)."""
    k = max(1, min(10, len(losses) // 2))
    return smoothed(losses[:k]), smoothed(losses[-k:]), k


def time_policy(run: Run, policy: Policy) -> list[float]:
    """Seconds of each of --measure-iterations iterations, after one warm-up iteration."""
    with run.runner(policy) as made:
        tr = run.trainer(made.runner)
        tr.step()
        times = []
        for _ in range(run.cfg.measure_iterations):
            tr.step()
            times.append(tr.step_seconds)
        return times


def train_policy(run: Run, policy: Policy):
    """Train with the last policy; return (trainer, final state, losses, seconds per iteration,
    first iteration), or the exit status when stopped by Ctrl-C (or SIGTERM).

    A signal is only acted on between iterations (engine/interrupts.py): the checkpoint then
    holds one whole iteration's state, never a mix of two. A second Ctrl-C abandons the
    iteration in flight and saves nothing from it."""
    cfg = run.cfg
    with run.runner(policy) as made:
        trainer = run.trainer(made.runner)
        if cfg.resume:
            trainer.load(cfg.resume)
        start = trainer.iteration
        todo = max(0, cfg.iterations - start)
        if cfg.resume:
            print(f"resumed from {cfg.resume} at iteration {start}; {todo} to go")
        losses, times = [], []
        bar = progress_bar(cfg, todo)
        with StopAtBoundary() as stop, StepRecords(run.folder) as steps:
            try:
                while trainer.iteration < cfg.iterations and not stop.requested:
                    losses.append(trainer.step())
                    times.append(trainer.step_seconds)
                    steps.add(trainer.iteration, losses[-1], times[-1])
                    bar.update(1)
                    bar.set_postfix_str(f"loss {losses[-1]:.3f}", refresh=False)
                    if cfg.checkpoint and trainer.iteration % cfg.save_every == 0:
                        save_checkpoint(cfg, trainer)
                if stop.requested:
                    bar.close()
                    if cfg.checkpoint:
                        save_checkpoint(cfg, trainer)
                        print(f"interrupted at iteration {trainer.iteration}; checkpoint saved to {cfg.checkpoint}")
                    else:
                        print(f"interrupted at iteration {trainer.iteration} (no --checkpoint given, nothing saved)")
                    return stop.exit_status
            except KeyboardInterrupt:       # the second signal: the iteration in flight is lost
                bar.close()
                kept = (f"; {cfg.checkpoint} keeps its last save" if cfg.checkpoint else "")
                print(f"interrupted again during iteration {trainer.iteration + 1}: abandoned, nothing saved "
                      f"from it{kept}")
                return 130
        bar.close()
        if cfg.checkpoint:
            save_checkpoint(cfg, trainer)
        return trainer, trainer.state, losses, times, start


def written(flag: str, path: str, write):
    """``write()``'s result, or the run stopped in one line naming the output that could not be
    written (a pipe without a reader, a full disk: an OSError traceback after the work)."""
    try:
        return write()
    except OSError as e:
        raise EngineError(f"{flag} {path}: could not be written ({e.strerror or e}); choose a writable file, or "
                          "start the pipe's reader first") from None


def save_checkpoint(cfg: RunConfig, trainer: Trainer) -> None:
    """Save, or stop the run in one line: a run asked to checkpoint that no longer can (the
    disk filled, a pipe's reader went away) must not train on as if its work were kept. The
    checkpoint on disk before this save stays whole (written to a temporary, then renamed)."""
    try:
        trainer.save(cfg.checkpoint, cfg.checkpoint_settings)
    except OSError as e:
        raise EngineError(f"--checkpoint {cfg.checkpoint}: could not be written at iteration {trainer.iteration} "
                          f"({e.strerror or e}); training stopped there, the last checkpoint written stays; "
                          "choose a writable file with room") from None


def progress_bar(cfg: RunConfig, total: int) -> tqdm:
    """tqdm on stderr when it is a terminal; nothing in a piped log (hundreds of carriage-return
    updates are noise there)."""
    return tqdm(total=total, desc="train", unit="it", file=sys.stderr,
                disable=cfg.quiet or not sys.stderr.isatty())


def identical_to_unlimited(run: Run, final_state) -> bool:
    """Train the unlimited-memory run on the same backend over the same iterations; compare bit
    for bit."""
    cfg = run.cfg
    with unlimited_runner(run.placement, run.facts, run.programs) as made:
        ref = run.trainer(made.runner)
        if cfg.resume:
            ref.load(cfg.resume)
        while ref.iteration < cfg.iterations:
            ref.step()
        state = ref.state
    # equal_nan: a run that diverged holds NaNs, bit-identical ones included
    return all(np.array_equal(a, final_state[t], equal_nan=True) for t, a in state.items())


def policy_rows(run: Run, timed: dict | None = None) -> list[PolicyRow]:
    """A row per planned policy; ``timed``: each policy's timed iterations (None: simulate-only)."""
    g = run.graph
    rows = []
    for p in run.cfg.policies:
        if p.name not in run.programs:
            continue
        program, sim = run.programs[p.name]
        quality = run.quality.get(p.name)
        times = timed[p.name] if timed else None
        rows.append(PolicyRow(p.name, sim.total, statistics.median(times) if times else None, batch_of(g),
                              program.bytes_moved(g, SWAP_IN), program.bytes_moved(g, SWAP_OUT),
                              program.arena.arena_bytes, len(program.instrs), p.unlimited,
                              quality.bounds.recompute_bound if quality else None,
                              quality.stalls.to_json() if quality else None, spread(times) if times else None,
                              quality.bounds.bound if quality else None,
                              min(times) if times else None, max(times) if times else None))
    return rows


def train(cfg: RunConfig, report: JsonReport | None = None) -> int:
    """The run; returns its exit status. ``report`` gathers the --json figures as they are
    known (engine/cli/report_json.py writes them, whatever the end)."""
    report = report or JsonReport([], None)
    check_flags(cfg)
    if cfg.ranks > 1:
        return data_parallel.train(cfg, report)
    try:
        check_outputs(cfg)
    except JsonTaken:
        report.path = None              # the file it names is another's: keep it
        raise
    check_out(cfg)
    inputs = check_inputs(cfg)
    check_unused(cfg)
    own_arrays = check_user_files(cfg)
    placement = None
    if not cfg.simulate_only:          # nothing runs when simulating
        try:
            placement = backend_registry.choose(cfg.backend, cfg.device, cfg.link_gbps)
        except backend_registry.BackendUnavailable as e:
            raise UsageError(str(e)) from None
    g = build_model(cfg)               # a model that cannot be built is refused before the run prints
    if cfg.planned:                    # a first run: the planner compiles in the background, or first
        first_run.settle(len(g.nodes))
    if placement and cfg.planned:      # the numpy reference alone uses no backend and no link
        print(placement.announcement())
    facts = GraphFacts(g)
    check_resume_fits(cfg, g, inputs)
    check_search_size(cfg, g)
    unused = unused_settings(cfg, placement)       # said once the run has gone through (a refusal stays one line)
    unplanned = [p.name for p in cfg.policies if not p.runs_program]
    if cfg.simulate_only and unplanned:
        raise UsageError(f"--simulate-only cannot run the {unplanned[0]} policy; choose from "
                         f"{', '.join(n for n, p in POLICIES.items() if p.runs_program)}")
    budget = choose_budget(cfg, facts) if cfg.planned else None
    report.update(model=g.name, batch=batch_of(g), budget=budget.device_bytes if budget else None,
                  budget_bytes=budget.device_bytes if budget else None,
                  peak_bytes=facts.peak_bytes if budget else None, profile=None, search=None)
    if not cfg.simulate_only:
        check_host_memory(cfg, g, facts.peak_bytes)
    if cfg.simulate_only:
        data = None
    else:                              # made once, shared by every run
        data = data_for(cfg, g, own_arrays) if own_arrays is not None else TeacherData(g, cfg.seed)
    run = Run(cfg, facts, placement, data)
    s = g.summary()
    typed = (g.leaves(Kind.PARAMETER) or g.leaves(Kind.INPUT))[0]      # a GPT's first input is its token ids
    print(f"model {g.name}, batch {batch_of(g)}, {g.tensors[typed].dtype}: {s.operators} "
          f"operators, {s.distinct_sizes} distinct tensor sizes, "
          f"{format_bytes(s.bytes_by_kind['parameter'] // 2)} parameters")
    if cfg.data and data is not None:
        print(f"data   {cfg.data}: {data.samples} samples, each epoch {data.samples // data.batch_size} batches "
              "in a fresh order")
    if budget:
        peak = facts.peak_bytes
        print(f"unlimited-memory peak {format_bytes(peak)}; budget {format_bytes(budget.device_bytes)} "
              f"({budget.device_bytes / peak:.2f} of peak)")
        if budget.device_bytes >= peak:
            print(f"note: the budget holds the whole peak, so nothing needs to swap; a --memory below "
                  f"{format_bytes(peak)} makes the policies differ")
    profile = choose_profile(cfg, facts, placement, data, inputs.profile) if budget else None
    if profile:
        source = profile_source(cfg.profile, profile)
        report.update(profile=source)
        print(f"profile {describe_profile(source)}")
    if profile and cfg.save_profile:
        written("--save-profile", cfg.save_profile, lambda: profile.save(cfg.save_profile))
        print(f"profile saved to {cfg.save_profile}")
    made: dict = {}
    if budget:
        budget, made = grow_default_budget(cfg, facts, budget, profile)
        report.update(budget=budget.device_bytes, budget_bytes=budget.device_bytes)
    out_dir = run.folder = make_run_folder(cfg, g.name)
    steps_path = None if cfg.simulate_only else os.path.join(out_dir, STEPS_FILE)    # written as it trains
    report.update(run_dir=out_dir, steps_path=steps_path)
    print(f"run folder {out_dir}")
    search: dict = {}
    run.programs = plan_policies(cfg, facts, budget, profile, out_dir, inputs.plan, search, made) if budget else {}
    run.quality = assess_plans(cfg, facts, budget, profile, run.programs) if budget else {}
    report.update(search=search or None)
    if search and search["stopped"] == "no search":
        print(f"search none ({search['policy']} planned in the default order with its default allocation; "
              "--search-seconds to search)")
    if cfg.simulate_only:
        rows = policy_rows(run)
        print(policy_table(rows, facts.peak_bytes if budget else None))
        save_artifacts(run, out_dir)
        report.update(backend=None, policies=rows_to_json(rows))
        say_warnings(unused)
        return 0
    report.update(**placement.kind.to_json(placement, run.device_name))
    *others, last = cfg.policies
    load_before = load_average()          # a load around the timing makes its figures noise
    timed = {p.name: time_policy(run, p) for p in others}
    result = train_policy(run, last)
    if isinstance(result, int):
        return result
    trainer, final_state, losses, times, start = result
    timed[last.name] = times[1:] or times
    load = HostLoad.now(load_before)
    rows = policy_rows(run, timed)
    warnings = timing_warnings(rows, load)
    report.update(policies=rows_to_json(rows), load_average=load.after, load_average_before=load.before,
                  usable_cores=load.cores, timing_warnings=warnings)
    if rows:
        print(f"backend {placement.kind.describe(placement, run.device_name)}")
        print(policy_table(rows, facts.peak_bytes if budget else None))
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    first, final, k = loss_ends(losses)
    print(f"train  {len(losses)} iterations with {last.name}: loss {first:.3f} -> {final:.3f} (means of the "
          f"first and last {k}), {statistics.median(times):.4f} s/iter")
    diverged = next((start + i + 1 for i, x in enumerate(losses) if not math.isfinite(x)),
                    None)
    if diverged is not None:
        print(f"warning: the loss is not finite from iteration {diverged} on: training diverged (a smaller --lr "
              "may help)", file=sys.stderr)
    same = None
    if cfg.check and last.runs_program:
        same = identical_to_unlimited(run, final_state)
        print(f"parameters identical to the unlimited run: {'yes (bit for bit)' if same else 'NO'}")
    if cfg.checkpoint:
        print(f"checkpoint saved to {cfg.checkpoint} (iteration {trainer.iteration})")
    print(f"steps  per-iteration loss and seconds in {steps_path}")
    if cfg.save_weights:
        print(f"weights saved to {cfg.save_weights} "
              f"({written('--save-weights', cfg.save_weights, lambda: save_weights(cfg, g, final_state))})")
    save_artifacts(run, out_dir)
    say_warnings(unused)
    report.update(weights_path=cfg.save_weights)
    report.update(**placement.kind.to_json(placement, run.device_name), iterations=len(losses),
                  loss_first=first, loss_last=final, loss_finite=diverged is None, identical=same)
    return 1 if same is False else 0


def say_warnings(warnings: list[str]) -> None:
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)


def save_artifacts(run: Run, out_dir: str) -> None:
    cfg, g, programs = run.cfg, run.graph, run.programs
    if not programs:
        return
    policy = [p.name for p in cfg.policies if p.name in programs][-1]
    program, sim = programs[policy]
    os.makedirs(out_dir, exist_ok=True)
    plan_path, trace_path = os.path.join(out_dir, "plan.json"), os.path.join(out_dir, "trace.json")
    with open(plan_path, "w") as f:
        json.dump(program.to_dict(), f)
    with open(trace_path, "w") as f:
        json.dump(sim.to_chrome_trace(program, g), f)
    print(f"plan ({policy}) saved to {plan_path}; simulated trace: {trace_path} (open in Perfetto)")
    searching = cfg.searching
    if cfg.save_plan and searching is not None:
        text = json.dumps(programs[searching.name][0].to_dict())       # folders made, as preflight allowed
        written("--save-plan", cfg.save_plan, lambda: write_atomically(cfg.save_plan, lambda f: f.write(text.encode())))
        print(f"{searching.name} plan saved to {cfg.save_plan}")


def main(argv=None) -> int:
    """Run ``python -m engine.train ARGS``; returns the exit status. With --json the report is
    written whatever the end (engine/cli/command.py, as every command does)."""
    return run_command(PROG, argv, _parse, train)


def _parse(argv: list[str]) -> Parsed:
    cfg = RunConfig.from_args(parser().parse_args(with_config(argv)))
    return Parsed(cfg, settings_of(cfg), cfg.json)     # what --config reads back (engine/cli/settings.py)
