"""engine.train reports each plan's lower bounds and stalls: "x bound" (recomputing allowed) and
"x swap bound" in the table, bound_s, x_bound, swap_bound_s, x_swap_bound and stalls in --json
(engine/cli/plans.py assess_plans)."""
import json

import pytest

from engine.cli.plans import plan_quality
from engine.profile import analytic_profile
from engine.train import main
from planner.budget import make_budget
from planner.facts import GraphFacts
from planner.policy import plan_with
from planner.simulate import simulate
from tests.engine.cli.test_run import TINY_LSTM
from zoo import small

STALL_FIELDS = {"total_s", "compute_busy_s", "compute_idle_s", "copy_compute_overlap_s", "both_directions_s",
                "swap_ins", "swap_ins_held_by_swap_out", "held_fraction", "compute_wait_on_swap_in_s"}


def test_table_and_json_carry_the_bound_and_the_stalls(tmp_path, capsys):
    report = tmp_path / "r.json"
    argv = TINY_LSTM + ["--simulate-only", "--policy", "ideal,odswap,swapadvisor", "--json", str(report),
                        "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("policy"))
    assert "vs ideal" in header and "x bound" in header and "x swap bound" in header
    policies = json.loads(report.read_text())["policies"]
    for p in policies:
        assert p["bound_s"] > 0 and p["x_bound"] == pytest.approx(p["sim_s"] / p["bound_s"])
        assert p["x_bound"] >= 1 - 1e-9            # no plan beats its bound
        # These plans only swap: the swap-only bound holds them too, and is the tighter.
        assert p["swap_bound_s"] >= p["bound_s"] and p["x_swap_bound"] == pytest.approx(p["sim_s"] / p["swap_bound_s"])
        assert p["x_swap_bound"] >= 1 - 1e-9
        assert STALL_FIELDS <= set(p["stalls"]) and p["stalls"]["total_s"] == pytest.approx(p["sim_s"])


def test_the_bound_is_taken_in_the_programs_own_order():
    g = small.lstm(batch=4, steps=3)
    facts = GraphFacts(g)
    profile = analytic_profile("v100")
    device = max(facts.smallest_budget, facts.peak_bytes // 3)
    budget = make_budget(facts, device)
    order = list(reversed(range(len(g.nodes))))      # not topological: only its name matters here
    program = plan_with("swapadvisor", g, device, profile, facts=facts)
    sim = simulate(program, g, profile)
    same = plan_quality(program, sim, facts, budget, profile)
    assert same.bounds.bound <= sim.total
    other = plan_quality(program, sim, GraphFacts(g, order), budget, profile)
    assert other.bounds == same.bounds                # the Program's schedule, not the facts' order
