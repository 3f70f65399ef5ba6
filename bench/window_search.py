"""The window policy's search (``planner.policies.window.search_window``) as it is against the
same search with some of its constants set otherwise: per (model, budget), the chosen plan's
simulated seconds and the window passes run (calls of the one pass), side by side.

Graphs: the tiny models at the window tests' five budgets (v100-nvlink profile, bestfit, as
tests/planner/test_window.py), then zoo models at budgets a position of the way (log scale)
from the smallest to unswapped, measured as the size-class pool places tensors ("pool") and as
bestfit does ("bestfit", bench.scaling's budgets), on the analytic V100 profile. ``--held-out``:
other zoo models and budgets, and the tiny models between those five budgets.

    python -m bench.window_search --set RESETTLE_MARGIN=inf [--quick] [--held-out] [--save NAME]
"""
from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager

import numpy as np

ZOO = [("gpt-4-1024-16", 8), ("gpt-16-1024-16", 8), ("wresnet-50-2", 64), ("wresnet-152-2", 64),
       ("nasnet-2", 64), ("nasnet-4", 64), ("rnn-2-8k", 256), ("inception-1", 32), ("resnet-50", 32),
       ("brnn-1-8k", 128)]
ZOO_BUDGETS = [(None, 0.3), (None, 0.5), (None, 0.75), (None, 0.9), ("bestfit", 0.5), ("bestfit", 0.75)]
TINY_BUDGETS = (5, slice(None))      # geomspace points from the smallest budget to unswapped; which taken
QUICK_TINY = ("wresnet", "gpt")
# --held-out: graphs and budgets none of the above has, to check a constant chosen on those
HELD_OUT_ZOO = [("gpt-2-1024-16", 8), ("gpt-8-1024-16", 8), ("wresnet-101-2", 64), ("wresnet-200-2", 64),
                ("rnn-1-8k", 256), ("inception-2", 32), ("nasnet-3", 64)]
HELD_OUT_BUDGETS = [(None, 0.4), (None, 0.65), ("bestfit", 0.4), ("bestfit", 0.6), ("bestfit", 0.75),
                    ("bestfit", 0.85)]
HELD_OUT_TINY = (9, slice(1, None, 2))   # the points between the five above


def parse_settings(pairs: list[str]) -> dict[str, float]:
    """``NAME=VALUE`` pairs naming numeric constants of the window module; SystemExit with one
    line otherwise."""
    import planner.policies.window as window

    settings = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        if not isinstance(getattr(window, name, None), (int, float)) or not name.isupper():
            sys.exit(f"bench.window_search: --set {pair}: not a numeric constant of planner.policies.window "
                     f"(for example RESETTLE_MARGIN=inf or REPLANNED=2)")
        try:
            settings[name] = type(getattr(window, name))(float(value))
        except (ValueError, OverflowError):
            sys.exit(f"bench.window_search: --set {pair}: '{value}' is not a number")
    return settings


@contextmanager
def counting_passes():
    """Yields a one-item list counting the window's one-pass calls while inside."""
    import planner.policies.window as window

    count, real = [0], window._one_pass

    def counted(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)
    window._one_pass = counted
    try:
        yield count
    finally:
        window._one_pass = real


@contextmanager
def constants(settings: dict[str, float]):
    import planner.policies.window as window

    before = {name: getattr(window, name) for name in settings}
    for name, value in settings.items():
        setattr(window, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(window, name, value)


def one_search(request, count) -> tuple[str, int]:
    """(the chosen plan's seconds, or the refusal's class name; passes run)."""
    from planner.errors import PlanError
    from planner.policies.window import search_window

    count[0] = 0
    try:
        seconds = f"{search_window(request)[1]:.7f}"
    except PlanError as e:
        seconds = type(e).__name__
    return seconds, count[0]


def requests(quick: bool, held_out: bool = False):
    """(label, budget label, PlanRequest) for every pair measured."""
    import zoo
    from bench.scaling import budget_at
    from engine.profile import analytic_profile
    from planner import policy
    from planner.allocation import unlimited_allocation
    from planner.budget import make_budget
    from planner.facts import GraphFacts

    nvlink = analytic_profile("v100-nvlink")
    points, taken = HELD_OUT_TINY if held_out else TINY_BUDGETS
    for family in (QUICK_TINY if quick else zoo.TINY):
        g = zoo.tiny(family)
        facts = GraphFacts(g)
        full = unlimited_allocation(facts).pool_bytes + facts.scratch.bytes
        for b in np.geomspace(facts.smallest_budget, full, points)[taken]:
            yield family, f"{int(b)} B", policy.PlanRequest(g, facts, make_budget(facts, int(b)), nvlink,
                                                            allocator="bestfit")
    if quick:
        return
    v100 = analytic_profile("v100")
    for model, batch in (HELD_OUT_ZOO if held_out else ZOO):
        g = zoo.build(model, batch=batch)
        facts = GraphFacts(g)
        for allocator, position in (HELD_OUT_BUDGETS if held_out else ZOO_BUDGETS):
            budget = make_budget(facts, budget_at(facts, position, allocator), ["bestfit"])
            yield model, f"{allocator or 'pool'} {position}", policy.PlanRequest(
                g, facts, budget, v100, v100.node_seconds(g))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a window constant for the 'against' columns (repeatable)")
    ap.add_argument("--quick", action="store_true", help="two tiny models only")
    ap.add_argument("--held-out", action="store_true",
                    help="other graphs and budgets (to check a constant chosen on the default ones)")
    ap.add_argument("--save", metavar="NAME", help="also write bench/results/NAME_<date>.txt")
    args = ap.parse_args(argv)
    settings = parse_settings(args.set)
    from bench.results_file import Transcript, planning_machine_line, save_results

    say = Transcript()
    against = ", ".join(f"{k}={v}" for k, v in settings.items()) or "(the same constants)"
    graphs = "held-out graphs and budgets" if args.held_out else "graphs and budgets"
    say(f"# window's search as it is, against {against}; {graphs}; simulated s of the chosen plan, window passes")
    say(f"# {planning_machine_line()}")
    say(f"{'model':18s} {'budget':>16s} {'as is s':>12s} {'passes':>6s} {'against s':>12s} {'passes':>6s}  change")
    tally = {"same": 0, "faster": 0, "slower": 0}
    passes = [0, 0]
    with counting_passes() as count:
        for model, budget, request in requests(args.quick, args.held_out):
            now, now_passes = one_search(request, count)
            with constants(settings):
                other, other_passes = one_search(request, count)
            passes[0] += now_passes
            passes[1] += other_passes
            try:
                change = float(now) / float(other) - 1
                verdict = "same" if change == 0 else ("faster" if change < 0 else "slower")
                shown = "same" if change == 0 else f"{change * 100:+.1f}%"
            except ValueError:
                verdict, shown = ("same", "same") if now == other else ("slower", "differs")
            tally[verdict] += 1
            say(f"{model:18s} {budget:>16s} {now:>12s} {now_passes:6d} {other:>12s} {other_passes:6d}  {shown}")
    say(f"# as is against {against}: {tally['same']} the same, {tally['faster']} faster, "
        f"{tally['slower']} slower or different; passes {passes[0]} against {passes[1]}")
    if args.save:
        print(f"saved {save_results(args.save, say.text())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
