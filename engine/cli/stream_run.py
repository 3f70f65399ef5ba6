"""`python -m engine.stream_train`: training whose graph changes from iteration to iteration.

Bucketed sequence lengths drawn per micro-batch (``--varying-seq 8,12,16``), an evaluation
every K iterations (``--eval-every``), gradient accumulation (``--accumulate``), forced
non-finite steps (``--nonfinite-at``), under a memory budget, planned by a policy per new
graph with SmartSwap's monitor and plan cache (engine/library/stream_plans.py). ``--check`` runs
the unlimited-memory stream too and says whether every parameter and optimizer state is
identical bit for bit. Bad input: one line, exit 2. The flags it shares with the other
commands are engine/cli/common_flags.py's.
"""
from __future__ import annotations

import argparse
import inspect
import os
import time

import numpy as np

import zoo
from planner import policy as policies_registry
from planner.facts import GraphFacts

from .. import backend_registry
from .. import iteration_stream as st
from ..autodiff import make_optimizer
from ..blas_threads import one_blas_thread
from ..checkpoint import written_through
from ..errors import UsageError
from ..files import physical_memory
from ..op_monitor import Monitor, stages_figure
from ..training import StreamTrainer
from ..units import format_bytes
from ..library.planning import profile_of
from ..library.runners import unlimited_runner
from ..library.stream_plans import StreamPlanner, WindowObserver
from . import common_flags as shared
from .command import namespace_settings, run_command
from .flag_types import nonnegative_int, positive_int
from .plans import ANALYTIC_DEFAULT, profile_source
from .report_json import JsonReport

PROG = "engine.stream_train"


def parser() -> argparse.ArgumentParser:
    p = shared.command_parser(PROG, "Train on a stream of changing graphs (bucketed lengths, evaluations, gradient "
                                    "accumulation, skipped non-finite steps) under a memory budget, SmartSwap-style.")
    shared.add_model(p, shared.STREAM)
    shared.add_batch(p)
    p.add_argument("--varying-seq", metavar="L[,L...]", default=None,
                   help="sequence lengths drawn per micro-batch, e.g. 8,12,16 (default: the model's own length)")
    p.add_argument("--eval-every", type=nonnegative_int, default=0, metavar="K",
                   help="an evaluation (forward-only) iteration every K iterations (default 0: none)")
    p.add_argument("--accumulate", type=positive_int, default=1, metavar="N",
                   help="micro-batches per optimizer update (default 1)")
    p.add_argument("--nonfinite-at", default="", metavar="I[,I...]",
                   help="iterations whose loss is forced non-finite (loss scale inf): their window's update is "
                        "skipped (default: none)")
    shared.add_iterations(p)
    shared.add_seed(p)
    shared.add_optimizer(p)
    shared.add_lr(p)
    shared.add_memory(p, "half of the largest graph's unlimited peak")
    shared.add_policy(p, "smartswap", which="; it plans each new graph, and must run a Program under a budget")
    shared.add_profile(p)
    shared.add_backend(p)
    p.add_argument("--check", action="store_true",
                   help="also run the unlimited-memory stream and compare every parameter bit for bit")
    p.add_argument("--stages-plot", metavar="PNG", default=None,
                   help="plot the monitor's stage against the iteration (needs matplotlib)")
    shared.add_json(p)
    return p


def _ints(text: str, flag: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"{flag} takes iteration numbers separated by commas (e.g. 33,400), got '{text}'") from None


def _builder(model: str, batch: int | None, buckets: tuple[int, ...]):
    try:
        family, _ = zoo.parse(model)
    except ValueError as e:
        raise UsageError(str(e)) from None
    build = getattr(__import__(family.module, fromlist=[family.builder]), family.builder)
    if buckets and family.size_option not in ("seq", "steps"):
        raise UsageError(f"--varying-seq needs a model with a sequence length (gpt or rnn), not '{model}'")
    positions = {"positions": max(buckets)} if buckets and "positions" in inspect.signature(build).parameters \
        else {}
    return lambda seq: zoo.build(model, batch=batch, size=seq, **positions)


def _nonfinite_at(text: str, iterations: int) -> tuple[int, ...]:
    """--nonfinite-at's iterations, each one the run reaches (a negative one, or one past the
    last, changed nothing and was accepted)."""
    at = _ints(text, "--nonfinite-at")
    outside = next((i for i in at if not 0 <= i < iterations), None)
    if outside is not None:
        raise UsageError(f"--nonfinite-at {outside}: iterations are numbered from 0 to {iterations - 1} "
                         f"(--iterations {iterations}); give one in that range")
    return at


def _check_windows(args) -> None:
    """--eval-every and --accumulate that the run never reaches change nothing: no evaluation, or
    no update at all (every gradient accumulated and dropped)."""
    if args.eval_every > args.iterations:
        raise UsageError(f"--eval-every {args.eval_every}: the first evaluation would be iteration {args.eval_every}, "
                         f"past --iterations {args.iterations}; give at most {args.iterations} (or 0 for none)")
    training = args.iterations - (args.iterations // args.eval_every if args.eval_every else 0)
    if args.accumulate > training:
        raise UsageError(f"--accumulate {args.accumulate}: the run has {training} training iterations, so no "
                         f"window of {args.accumulate} micro-batches ends and no update runs; give at most {training}")


def _check_host(facts: list[GraphFacts]) -> None:
    """A stream whose largest graph needs more host memory than the machine has would die
    allocating it (--batch 2**20: a MemoryError)."""
    from .preflight import host_bytes_needed
    need = max(host_bytes_needed(f.graph, f.peak_bytes) for f in facts)
    have = physical_memory()
    if have and need > have:
        raise UsageError(f"the stream's largest graph needs at least {format_bytes(need)} of host memory (data, "
                         f"parameters, one iteration's tensors) and this machine has {format_bytes(have)}; use a "
                         "smaller --batch or --varying-seq")


def _check_plot(path: str | None) -> None:
    """--stages-plot is written after the run: a path that cannot take it is refused before."""
    if path is None:
        return
    from .preflight import check_names, check_writable_file
    check_names((("--stages-plot", path),))
    check_writable_file(path, "--stages-plot")
    if os.path.exists(path) and written_through(path) and os.path.realpath(path) != os.devnull:
        raise UsageError(f"--stages-plot {path}: is a pipe or device, and a plot is written by seeking in its file "
                         "(a traceback at the end of the run); give a regular file")
    try:
        from matplotlib.figure import Figure
    except ImportError:              # the run says so where the plot would be drawn
        return
    kinds = Figure().canvas.get_supported_filetypes()
    kind = os.path.splitext(path)[1][1:].lower()
    if kind and kind not in kinds:
        raise UsageError(f"--stages-plot {path}: matplotlib cannot write '.{kind}' files; use one of "
                         f"{', '.join('.' + k for k in sorted(kinds))}")


def run(args, report: JsonReport | None = None) -> int:
    report = report or JsonReport([], None, PROG)
    from .preflight import check_names
    check_names((("--profile", args.profile),))     # '' read as not given: the default, silently
    _check_plot(args.stages_plot)
    _check_windows(args)
    buckets = st.buckets_of(args.varying_seq) if args.varying_seq is not None else ()
    settings = st.StreamSettings(buckets, args.eval_every, args.accumulate,
                                 _nonfinite_at(args.nonfinite_at, args.iterations), args.seed)
    plan = st.IterationPlan(settings)
    pol = policies_registry.get(args.policy)
    if not pol.runs_program or not pol.needs_budget:
        raise UsageError(f"--policy {pol.name} plans no swapping under a budget; use smartswap or swapadvisor")
    build = _builder(args.model, args.batch, buckets)
    optimizer = make_optimizer(args.optimizer or zoo.default_optimizer(args.model), args.lr)

    def graphs():
        return st.IterationGraphs(build, optimizer, args.accumulate)

    try:
        stream = st.graphs_of(plan, graphs(), args.iterations)
    except ValueError as e:          # zoo's one-line refusal of a configuration that does not build
        raise UsageError(str(e)) from None
    facts = [GraphFacts(g) for _, gs in stream for g in gs]
    _check_host(facts)
    peak = max(f.peak_bytes for f in facts)
    device = args.memory if args.memory is not None else peak // 2
    # the graphs change as the stream goes: none runs before planning, so the default is analytic
    profile = profile_of(args.profile or ANALYTIC_DEFAULT)
    placement = backend_registry.choose(args.backend, args.device, args.link_gbps)
    report.update(model=args.model, budget_bytes=device, peak_bytes=peak, policy=pol.name,
                  profile=profile_source(args.profile, profile), **placement.kind.to_json(placement, ""))
    print(placement.announcement())
    mon = Monitor()
    planner = StreamPlanner(pol.name, device, profile, placement, args.sanitize, args.seed, mon)
    observe = WindowObserver(mon)
    trainer = StreamTrainer(graphs(), plan, planner.runner_for, args.seed, observe)
    print(f"{args.model}: {args.iterations} iterations, lengths {list(buckets) or 'fixed'}, evaluation every "
          f"{args.eval_every or '-'}, accumulation {args.accumulate}; budget {format_bytes(device)} (largest "
          f"unlimited peak {format_bytes(peak)}), policy {pol.name}, {placement.kind.name} backend", flush=True)
    t0 = time.perf_counter()
    try:
        with one_blas_thread():
            for i in range(args.iterations):
                stage = mon.stage        # the stage this iteration runs in; observing it may change it
                loss = trainer.step()
                if not np.isfinite(loss):
                    print(_nonfinite_line(plan.step(i), settings), flush=True)
                if (i + 1) % max(1, args.iterations // 10) == 0:
                    print(f"iteration {i + 1}{' (evaluation)' if plan.step(i).kind == st.EVAL else ''}: loss "
                          f"{loss:.4f}, stage {stage}", flush=True)
    finally:
        planner.close()
    wall = time.perf_counter() - t0
    plan_s = sum(s for _, s in planner.plan_seconds)
    it_s = np.array([t for _, t, _ in observe.times])
    mon_s = np.array([m for _, _, m in observe.times])
    print(f"done in {wall:.1f} s ({plan_s:.2f} s planning {planner.cache.misses} graphs); updates {trainer.updates}, "
          f"skipped {trainer.skipped}; plan cache {planner.cache.hits} hits, {planner.cache.misses} misses; "
          f"{planner.fallbacks} graphs planned by the fallback")
    print(f"monitor: median {1e3 * np.median(mon_s):.3f} ms per iteration beside {1e3 * np.median(it_s):.2f} ms "
          f"({100 * np.median(mon_s / it_s):.2f}%); stages: "
          + (", ".join(f"{i}:{s}" for i, s in mon.transitions()) or "WarmUp throughout"))
    report.update(iterations=args.iterations, wall_s=wall, planning_s=plan_s, graphs_planned=planner.cache.misses,
                  updates=trainer.updates, skipped=trainer.skipped, cache_hits=planner.cache.hits,
                  cache_misses=planner.cache.misses, fallbacks=planner.fallbacks,
                  iteration_median_s=float(np.median(it_s)), monitor_median_s=float(np.median(mon_s)),
                  stages=[[i, stage] for i, stage in mon.transitions()], identical=None)
    if args.stages_plot is not None:
        _plot(mon, args.stages_plot, f"{args.model}: {pol.name} on changing graphs (lengths "
              f"{'/'.join(map(str, buckets)) or 'fixed'}, accumulation {args.accumulate}), {placement.kind.name} "
              f"backend\nbudget {format_bytes(device)} (largest unlimited peak {format_bytes(peak)})",
              [i for i in range(args.iterations) if plan.step(i).kind == st.EVAL], settings.nonfinite_at)
    if args.check:
        made: dict = {}

        def unlimited(g):       # numpy's reference, or the unlimited Program on a backend of other kernels
            if g not in made:
                made[g] = unlimited_runner(placement, GraphFacts(g), {})
            return made[g].runner

        try:
            ref = StreamTrainer(graphs(), plan, unlimited, args.seed)
            for _ in range(args.iterations):
                ref.step()
        finally:
            for m in made.values():
                m.__exit__(None, None, None)
        a, b = trainer.named_state(), ref.named_state()
        same = set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in b)
        print(f"parameters identical to the unlimited run: {'yes' if same else 'NO'}")
        report.update(identical=same)
        return 0 if same else 1
    return 0


def _nonfinite_line(step: st.Step, settings: st.StreamSettings) -> str:
    """One line for a step whose loss is not finite, in place of numpy's warnings (the
    progress lines count iterations from 1, --nonfinite-at from 0: both are named)."""
    i = step.iteration
    what = f"forced non-finite (--nonfinite-at {i})" if i in settings.nonfinite_at else "not finite"
    then = ("" if step.kind == st.EVAL else "; its accumulation window's update is skipped" if step.ends_window
            else "; its accumulation window's update will be skipped")
    return f"iteration {i + 1}: loss {what}{then}"


def _plot(mon: Monitor, path: str, title: str, evaluations: list[int], nonfinite) -> None:
    try:
        fig = stages_figure(mon.log, title, evaluations, nonfinite)
    except ImportError:
        print("stage plot skipped: matplotlib is not installed (pip install matplotlib)")
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)     # preflight allowed a new folder
    fig.savefig(path)
    print(f"stage plot written to {path}")


def main(argv=None) -> int:
    return run_command(PROG, argv, lambda words: namespace_settings(parser().parse_args(words)), run)
