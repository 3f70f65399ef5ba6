"""CPU seconds per stage against operator count, per policy, on four model ladders.

Stages: build (the forward graph), autodiff (backward and update: ``build_training_graph``),
plan (``Policy.make`` at one budget, on a graph planned never before), verify
(``planner.verify``), simulate. Policies: swapadvisor on the size-class pool and on va alone
(2 MiB chunks; its default, auto, plans both and keeps the faster: the two columns' plan times
together, and its verify that of whichever won, which may change kind from one rung to the
next), lms, window, smartswap. Ladders: RNN
(rnn-L-8k), GPT (gpt-L-1024-16), WResNet (wresnet-D-2), NasNet (nasnet-R). The budget of a
rung lies 3/4 of the way (log scale) from its smallest budget to what it needs with nothing
swapped, both as the policy's allocator places tensors (``--budget-position``, ``budget_at``), so
every rung swaps. A stage shorter than SHORT_S is timed up to
REPEATS times and its least time kept.

Each (model, policy) runs in its own process under a memory cap and a CPU-time cap: one that
does not finish a stage within the cap shows "> cap" there (and, the ladder growing, on the
rungs above it, which are not run). Per ladder, policy and stage, the exponent is the least-
squares slope of log CPU seconds on log operators over the rungs measured that took at least
MIN_FIT_S (">=" where a rung above them hit the cap). Numba's compile is paid once, uncapped, before anything is timed.

    python -m bench.scaling [--quick] [--repeats 3] [--cap-seconds 60] [--cap-mib 4000] [--ladders rnn,gpt]
                            [--models rnn-8-8k:256,nasnet-25:64] [--policies swapadvisor,lms] [--save NAME]
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import resource
import signal
import subprocess
import sys
import time

import numpy as np

STAGES = ("build", "autodiff", "plan", "verify", "simulate")
POLICIES = {   # column name: (policy, allocator; None for the policy's default)
    "swapadvisor": ("swapadvisor", "pool"), "swapadvisor-va": ("swapadvisor", "va"),
    "lms": ("lms", None), "window": ("window", None), "smartswap": ("smartswap", None),
}
LADDERS = {    # name: (model, batch) rungs, smallest first; --quick takes QUICK's instead
    "rnn": [("rnn-1-8k", 256), ("rnn-2-8k", 256), ("rnn-4-8k", 256), ("rnn-8-8k", 256)],
    "gpt": [("gpt-2-1024-16", 8), ("gpt-4-1024-16", 8), ("gpt-8-1024-16", 8), ("gpt-16-1024-16", 8)],
    "wresnet": [("wresnet-50-2", 64), ("wresnet-101-2", 64), ("wresnet-152-2", 64), ("wresnet-200-2", 64)],
    "nasnet": [("nasnet-2", 64), ("nasnet-4", 64), ("nasnet-8", 64), ("nasnet-16", 64)],
}
QUICK = {
    "rnn": [("rnn-1-1k", 16), ("rnn-2-1k", 16)],
    "gpt": [("gpt-1-64-2", 2), ("gpt-2-64-2", 2)],
    "wresnet": [("wresnet-50-1", 2), ("wresnet-101-1", 2)],
    "nasnet": [("nasnet-1", 2), ("nasnet-2", 2)],
}
CAPPED = "> cap"


# ---------------------------------------------------------------------------- one measurement
def budget_at(facts, position: float, allocator: str | None = None) -> int:
    """The budget ``position`` of the way, on a log scale, from the smallest budget that runs
    the graph to what it needs with nothing swapped, both as ``allocator`` places tensors (a
    registered name; None: the size-class pool): the pool's class minimum and unlimited
    allocation, or for an allocator that puts a tensor in any free bytes (online, chunks), the
    heaviest operator's bytes and the live bytes at the peak. Measured from the pool's figures
    whatever the allocator (before 2026-11-27), a budget held everything of gpt-2-1024-16 and
    gpt-4-1024-16 at once (1.19 and 1.05 times the peak): bestfit's policies swapped nothing
    there and much on the larger rungs, and their exponents measured that change of regime."""
    from allocator import registry
    from planner.allocation import unlimited_allocation
    from planner.budget import smallest_budget

    scratch = facts.scratch.bytes
    if allocator is None or registry.SIZE_CLASSES in registry.get(allocator).kinds:
        low, high = facts.smallest_budget, unlimited_allocation(facts).pool_bytes + scratch
    else:
        low, high = smallest_budget(facts, [allocator]), facts.peak_bytes + scratch
    low = float(low)
    return int(math.exp(math.log(low) + position * (math.log(max(high, low)) - math.log(low))))


def measure(model: str, batch: int, policy_name: str, allocator: str | None, position: float, emit) -> None:
    """Run the five stages of one (model, policy), calling ``emit(stage, value)`` after each."""
    from threadpoolctl import threadpool_limits

    import engine.autodiff
    import zoo
    from allocator.registry import CHUNKED
    from engine.profile import analytic_profile
    from planner import policy as policies
    from planner.budget import make_budget
    from planner.facts import GraphFacts
    from planner.simulate import simulate
    from planner.verify import verify

    autodiff = [0.0]
    real = engine.autodiff.build_training_graph

    def timed_autodiff(*args, **kwargs):
        t0 = cpu_seconds()
        try:
            return real(*args, **kwargs)
        finally:
            autodiff[0] += cpu_seconds() - t0

    for family in zoo.FAMILIES.values():         # each builder calls its own import of autodiff
        module = importlib.import_module(family.module)
        if getattr(module, "build_training_graph", None) is real:
            module.build_training_graph = timed_autodiff
    profile = analytic_profile("v100")
    policy = policies.get(policy_name)
    with threadpool_limits(1):
        # numba's compiled code loads from its cache on first call: load it on a tiny graph first,
        # on va with chunks small enough for it (with 2 MiB ones no tiny graph plans, and the
        # chunk class's code, 0.25 CPU-s of loading, was timed on every rung too long to repeat)
        small_chunks = {"chunk_bytes": 4096} if CHUNKED in policies.placement_kinds(policy, allocator) else {}
        try:
            tiny = zoo.tiny("rnn")
            tiny_facts = GraphFacts(tiny)
            placed = policy.placed_by(allocator)
            tiny_budget = make_budget(tiny_facts, budget_at(tiny_facts, 0.9, placed), [placed])
            warm = policy.make(policies.PlanRequest(tiny, tiny_facts, tiny_budget, profile, allocator=allocator,
                                                    allocator_options=small_chunks))
            verify(warm, tiny, tiny_budget.device_bytes)
            simulate(warm, tiny, profile)
        except Exception:   # a policy that cannot plan the tiny graph: its first call is timed cold
            pass

        def build():
            autodiff[0] = 0.0
            t0 = cpu_seconds()
            graph = zoo.build(model, batch=batch)
            total = cpu_seconds() - t0
            return graph, (total - autodiff[0], autodiff[0])

        g, (build_s, autodiff_s) = least_of(build)
        emit("operators", len(g.nodes))
        emit("build", build_s)
        emit("autodiff", autodiff_s)
        fresh = [g]

        def plan():
            # Each try plans a graph planned never before, as a run does: what is made once per
            # graph (its facts, the pass's arrays, the chunked allocation) counts on every rung,
            # not only on those too long to repeat (rnn's swapadvisor plan: exponent 1.43 with the
            # small rungs' repeats warm, 1.11 cold on every rung)
            graph = fresh.pop() if fresh else zoo.build(model, batch=batch)
            t0 = cpu_seconds()
            facts = GraphFacts(graph)
            placed = policy.placed_by(allocator)
            budget = make_budget(facts, budget_at(facts, position, placed), [placed])
            request = policies.PlanRequest(graph, facts, budget, profile, profile.node_seconds(graph),
                                           allocator=allocator)
            made = policy.make(request)
            return (made, budget, graph), (cpu_seconds() - t0,)

        (program, budget, g), (plan_s,) = least_of(plan)
        emit("plan", plan_s)
        emit("verify", least_of(lambda: timed(lambda: verify(program, g, budget.device_bytes)))[1][0])
        emit("simulate", least_of(lambda: timed(lambda: simulate(program, g, profile)))[1][0])


# A stage this short is timed again, up to REPEATS times in all while the repeats stay under it
# together, and its least time kept: a single timing of a few milliseconds is mostly noise (a
# collection, a cache miss), which made fitted exponents of 1.3-1.5 out of stages that scale
# linearly when timed this way (autodiff on NasNet: 1.44 single, 1.10 least of repeats). A
# stage of well under a millisecond gets up to 50 tries (GPT's verify and simulate on the
# smallest rungs, whose least of 5 still gave exponents of 1.5-1.8).
SHORT_S = 0.25
REPEATS = 50


def cpu_seconds() -> float:
    """This process's CPU seconds, user and system, to the microsecond. Not time.process_time: once
    RLIMIT_CPU is set (the cap, ``run_one``), Linux reads the process clock only at each tick, 4 ms
    here, and the least of a short stage's repeats then fell a tick below its time (WResNet-50's
    verify 8 against 11.8 ms), steepening the ladders' exponents (1.34 against 1.08)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(run) -> tuple[object, tuple[float]]:
    t0 = cpu_seconds()
    out = run()
    return out, (cpu_seconds() - t0,)


def least_of(run) -> tuple[object, tuple[float, ...]]:
    """``run() -> (result, stage seconds)`` repeated while short: (the first result, each
    stage's least seconds)."""
    result, best = run()
    spent = sum(best)
    for _ in range(REPEATS - 1):
        if spent >= SHORT_S:
            break
        _, again = run()
        best = tuple(min(a, b) for a, b in zip(best, again))
        spent += sum(again)
    return result, best


def child_main(model: str, batch: int, policy_name: str, allocator: str | None, position: float) -> None:
    def emit(stage, value):
        print(json.dumps([stage, value]), flush=True)

    try:
        measure(model, batch, policy_name, allocator, position, emit)
    except MemoryError:
        print(json.dumps(["error", "memory cap"]), flush=True)
    except Exception as e:   # a policy that cannot plan this rung: its message is the cell
        print(json.dumps(["error", f"fails: {type(e).__name__}"]), flush=True)
        print(f"{model} {policy_name}: {type(e).__name__}: {e}", file=sys.stderr)


def run_one(model: str, batch: int, column: str, cap_seconds: float, cap_mib: int, position: float,
            env: dict) -> dict:
    """The stages of one (model, policy) measured in a child process under the caps: stage ->
    CPU seconds, "> cap", or an error's one line; "operators" -> the graph's size."""
    policy_name, allocator = POLICIES[column]

    def limits():
        resource.setrlimit(resource.RLIMIT_CPU, (int(cap_seconds), int(cap_seconds) + 5))
        resource.setrlimit(resource.RLIMIT_AS, (cap_mib << 20, cap_mib << 20))

    cmd = [sys.executable, "-m", "bench.scaling", "--child", model, str(batch), policy_name, allocator or "",
           str(position)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=limits, env=env,
                              timeout=6 * cap_seconds + 60)
        out, code = done.stdout, done.returncode
    except subprocess.TimeoutExpired as e:     # CPU-capped, so only a machine loaded far past its cores
        out, code = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), -signal.SIGKILL
    result: dict = {}
    for line in out.splitlines():
        try:
            stage, value = json.loads(line)
        except ValueError:
            continue
        result[stage] = value
    error = result.pop("error", None)
    for stage in STAGES:
        if stage not in result:
            result[stage] = error if error else CAPPED if code in (-signal.SIGXCPU, -signal.SIGKILL) else f"exit {code}"
            error = error and "-"     # the stages after the one that failed were not reached
    return result


# ---------------------------------------------------------------------------- the table
# A stage shorter than this on a rung is left out of its exponent: timer and cache noise (GPT's
# smallest rungs: autodiff 0.2-1 ms, which at a 1 ms floor made a slope of 1.60 out of a stage
# linear from 8 ms up).
MIN_FIT_S = 0.005


def exponent(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of log seconds on log operators over the rungs where the stage took
    at least MIN_FIT_S (None under two such rungs)."""
    pts = [(n, s) for n, s in points if s >= MIN_FIT_S]
    if len(pts) < 2 or len({n for n, _ in pts}) < 2:
        return None
    x, y = np.log([n for n, _ in pts]), np.log([s for _, s in pts])
    return float(np.polyfit(x, y, 1)[0])


def cell(value) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def least_of_runs(results: list[dict]) -> dict:
    """One (model, policy)'s stages over repeated child runs: each stage's least CPU seconds
    where every run timed it, else the first run's value (a cap, a refusal)."""
    merged = dict(results[0])
    for stage in STAGES:
        values = [r.get(stage) for r in results]
        if all(isinstance(v, float) for v in values):
            merged[stage] = min(values)
    return merged


def ladder_table(ladder: str, rungs, columns, cap_seconds: float, cap_mib: int, position: float, env: dict,
                 log, repeats: int = 1) -> list[list[str]]:
    """The ladder's rows and exponents. With ``repeats``, the ladder is run that many rounds, each
    round every (rung, policy) once, each stage's least kept: a slow spell of a shared machine
    then slows one run of a cell, not all of them (run back to back, the three runs of rnn-8-8k
    on 2026-11-27 all ran 1.2-1.5x slower, simulate too, and moved rnn's exponents by up to 0.1)."""
    rows = []
    capped_from: dict[str, int] = {}
    runs: dict[tuple[int, str], list[dict]] = {}
    for round_no in range(repeats):
        for r, (model, batch) in enumerate(rungs):
            for column in columns:
                if round_no == 0 and column in capped_from:     # a smaller rung hit the cap: this one would too
                    runs[(r, column)] = [{stage: CAPPED for stage in STAGES}]
                elif round_no == 0:
                    runs[(r, column)] = [run_one(model, batch, column, cap_seconds, cap_mib, position, env)]
                    if any(runs[(r, column)][0][s] == CAPPED for s in STAGES):
                        capped_from[column] = r
                elif all(isinstance(runs[(r, column)][0][s], float) for s in STAGES):   # a cap or a refusal is not run again
                    runs[(r, column)].append(run_one(model, batch, column, cap_seconds, cap_mib, position, env))
                else:
                    continue
                result = least_of_runs(runs[(r, column)])
                round_note = f" (round {round_no + 1} of {repeats}, least so far)" if repeats > 1 else ""
                log(f"{model} {column}{round_note}: " + ", ".join(f"{s} {cell(result[s])}" for s in STAGES))
    measured: dict[tuple[str, str], list[tuple[int, float]]] = {}
    beyond: dict[tuple[str, str], bool] = {}
    for r, (model, batch) in enumerate(rungs):
        ops = None
        for column in columns:
            result = least_of_runs(runs[(r, column)])
            ops = result.get("operators", ops)
            stages = STAGES if column == columns[0] else STAGES[2:]
            for stage in stages:
                if isinstance(result[stage], float) and ops:
                    measured.setdefault((column, stage), []).append((ops, result[stage]))
                elif result[stage] == CAPPED:
                    beyond[(column, stage)] = True
            rows.append([ladder, model, ops if ops else "?", column]
                        + [cell(result[s]) if s in stages else "" for s in STAGES])
    for column in columns:
        row = [ladder, "exponent", "", column]
        for stage in STAGES:
            if column != columns[0] and stage in STAGES[:2]:
                row.append("")
                continue
            k = exponent(measured.get((column, stage), []))
            row.append("-" if k is None else (">=" if beyond.get((column, stage)) else "") + f"{k:.2f}")
        rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the two small rungs of each ladder (seconds, for tests)")
    ap.add_argument("--cap-seconds", type=float, default=60.0, help="CPU seconds one (model, policy) may take")
    ap.add_argument("--cap-mib", type=int, default=4000, help="address space one (model, policy) may take")
    ap.add_argument("--ladders", default=",".join(LADDERS))
    ap.add_argument("--models", metavar="MODEL:BATCH,...",
                    help="instead of the ladders, these models as one ladder ('models'), e.g. the issue's "
                         "targets: rnn-8-8k:256,nasnet-25:64,rnn-16-8k:256")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--save", metavar="NAME", help="also write the table to bench/results/NAME_<date>.txt")
    ap.add_argument("--budget-position", type=float, default=0.75,
                    help="each rung's budget: this far from its smallest budget (0) to unswapped (1), log scale")
    ap.add_argument("--repeats", type=int, default=1,
                    help="run the ladders this many rounds, each (model, policy) once a round, each stage's least "
                         "kept (a stage of seconds varies 20-30%% between runs on a shared machine, and its "
                         "exponent with it)")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        model, batch, policy_name, allocator, position = args.child
        child_main(model, int(batch), policy_name, allocator or None, float(position))
        return 0
    ladders = LADDERS if not args.quick else QUICK
    chosen = [x for x in args.ladders.split(",") if x]
    if args.models:
        try:
            ladders = {"models": [(m, int(b)) for m, b in (x.rsplit(":", 1) for x in args.models.split(",") if x)]}
        except ValueError:
            print(f"python -m bench.scaling: --models wants MODEL:BATCH,... (got '{args.models}')", file=sys.stderr)
            return 2
        chosen = ["models"]
    columns = [x for x in args.policies.split(",") if x]
    bad = [x for x in chosen if x not in ladders] + [x for x in columns if x not in POLICIES]
    if bad or not chosen or not columns:
        print(f"python -m bench.scaling: unknown ladder or policy {', '.join(bad) or '(none given)'} (ladders: "
              f"{', '.join(LADDERS)}; policies: {', '.join(POLICIES)})", file=sys.stderr)
        return 2
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))     # the children import this copy
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    log = (lambda line: print(line, file=sys.stderr, flush=True))
    # Numba compiles on first use and caches: pay it here, uncapped, so no cap counts it.
    first_model, first_batch = ladders[chosen[0]][0]
    run_one(first_model, first_batch, "swapadvisor", 3600, args.cap_mib, args.budget_position, env)
    rows = []
    for ladder in chosen:
        rows += ladder_table(ladder, ladders[ladder], columns, args.cap_seconds, args.cap_mib, args.budget_position,
                             env, log, max(1, args.repeats))
    if args.models:     # models of different families: a slope over them means nothing
        rows = [r for r in rows if r[1] != "exponent"]
    text = render(rows, args)
    print(text)
    if args.save:
        from bench.results_file import save_results
        print("saved to", save_results(args.save, text))
    return 0


def render(rows, args) -> str:
    from tabulate import tabulate

    from bench.results_file import cpu_name
    import datetime
    import platform

    head = (f"# bench.scaling{' --quick' if args.quick else ''}: CPU seconds per stage (getrusage of "
            f"a child process, one BLAS thread{f', least of {args.repeats} runs' if args.repeats > 1 else ''}), "
            f"cap {args.cap_seconds:g} CPU-s and {args.cap_mib} MiB each; "
            f"budget {args.budget_position:g} of the way from the smallest to unswapped (log scale)\n"
            f"# machine: {platform.platform()}, {os.cpu_count()} cores: {cpu_name()}; "
            f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}\n"
            "# build and autodiff are the first policy's process; exponent: slope of log seconds on log "
            f"operators over the rungs where the stage took at least {MIN_FIT_S * 1e3:g} ms\n")
    return head + tabulate(rows, headers=["ladder", "model", "operators", "policy", *STAGES],
                           disable_numparse=True) + "\n"


if __name__ == "__main__":
    sys.exit(main())
