"""Tests for planner/budget.py: the device budget split once into operator scratch and the pool,
and the one refusal of a budget too small to run."""
import dataclasses

import pytest

from engine.errors import EngineError
from engine.ir import Graph
from engine.units import format_bytes
from planner import budget as budget_module
from planner.budget import Budget, make_budget, smallest_budget, smallest_that_plans
from planner.errors import OutOfRoom, PlanError
from planner.facts import GraphFacts


def test_the_budget_is_scratch_plus_pool(lstm_graph):
    f = GraphFacts(lstm_graph)
    for device in (f.smallest_budget, 3 * f.smallest_budget + 7):
        b = make_budget(f, device)
        assert b == Budget(device, f.scratch.bytes)
        assert b.scratch_bytes > 0 and b.pool_bytes == device - f.scratch.bytes
    assert make_budget(f, f.smallest_budget).pool_bytes == f.minimal_allocation.pool_bytes
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.device_bytes = 1


def test_too_small_a_budget_names_the_operator_and_the_smallest_budget(lstm_graph):
    g = lstm_graph
    f = GraphFacts(g)
    d, need = f.demand, f.smallest_budget
    node = g.nodes[d.heaviest_node]
    with pytest.raises(PlanError) as e:
        make_budget(f, need - 1)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg == (f"a budget of {format_bytes(need - 1)} cannot run {node.name} ({node.op}; its inputs and "
                   f"outputs alone need {format_bytes(d.heaviest_bytes)}, plus {format_bytes(f.scratch.bytes)} "
                   f"of operator scratch); the smallest budget that runs this model is {format_bytes(need)}")
    heavy = sum(g.tensors[t].nbytes for t in dict.fromkeys(node.inputs + node.outputs))
    assert d.heaviest_bytes == heavy
    with pytest.raises(PlanError, match="the smallest budget that runs this model is"):
        make_budget(f, 0)


def test_without_operator_scratch_the_message_does_not_mention_it():
    g = Graph("chain")
    x = g.input("x", (256,))
    (y,) = g.apply("relu", [x], name="r0")
    g.apply("relu", [y], name="r1")
    f = GraphFacts(g)
    assert make_budget(f, 2048) == Budget(2048, 0)
    with pytest.raises(PlanError, match=r"^a budget of 1000 B cannot run r0 \(relu; its inputs and outputs alone "
                                        r"need 2.0 KiB\); the smallest budget that runs this model is 2.0 KiB$"):
        make_budget(f, 1000)
    with pytest.raises(PlanError, match="cannot run r0"):
        make_budget(f, 2047)


def test_plan_error_is_an_engine_error_and_a_value_error():
    assert issubclass(PlanError, EngineError) and issubclass(PlanError, ValueError)
    import planner.swap_planner
    assert planner.swap_planner.PlanError is PlanError


def test_online_allocators_need_only_room_for_the_heaviest_operator(lstm_graph):
    # The size-class pool needs every class's objects at once (each the class's largest size);
    # an online allocator places any tensor in any free bytes: the heaviest operator bounds it.
    f = GraphFacts(lstm_graph)
    online = f.demand.heaviest_bytes + f.scratch.bytes
    assert online < f.smallest_budget
    assert smallest_budget(f, ("bestfit",)) == smallest_budget(f, ("va",)) == online
    assert smallest_budget(f, ("pool", "va")) == online and smallest_budget(f) == f.smallest_budget
    between = (online + f.smallest_budget) // 2
    assert make_budget(f, between, ("bestfit",)) == Budget(between, f.scratch.bytes)
    with pytest.raises(PlanError, match=f"the smallest budget that runs this model is {format_bytes(online)}"):
        make_budget(f, online - 1, ("va",))
    with pytest.raises(PlanError):
        make_budget(f, between)                 # the pool's own refusal


def test_the_command_line_budget_follows_the_named_policies_allocators(lstm_graph, tmp_path):
    from engine.cli.config import RunConfig
    from engine.cli.flags import parser
    from engine.cli.plans import choose_budget
    f = GraphFacts(lstm_graph)
    online = f.demand.heaviest_bytes + f.scratch.bytes
    between = (online + f.smallest_budget) // 2

    def budget(*flags):
        args = parser().parse_args(["--memory", f"{between}B", *flags])
        return choose_budget(RunConfig.from_args(args), f)
    assert budget("--policy", "window").device_bytes == between
    assert budget("--policy", "lms", "--allocator", "va").device_bytes == between
    with pytest.raises(PlanError):
        budget("--policy", "swapadvisor")


def test_smallest_that_plans_finds_the_least_budget_a_policy_runs_at(lstm_graph):
    f = GraphFacts(lstm_graph)
    start, peak = f.smallest_budget, f.peak_bytes
    for needs in (start, start + 1, int(0.7 * peak), peak + 3, int(1.9 * peak)):
        tried = []

        def make(b: Budget):
            if b.device_bytes < needs:
                raise OutOfRoom(f"no room in {b.device_bytes}")
            return b.device_bytes

        budget, made = smallest_that_plans(f, start, ("pool",), make, lambda n, e: tried.append(n))
        assert made == budget.device_bytes and budget.scratch_bytes == f.scratch.bytes
        assert needs <= budget.device_bytes <= max(needs, start) + budget_module.TOLERANCE * peak
        assert all(n < needs for n in tried) and len(tried) <= 12, tried


def test_smallest_that_plans_gives_up_past_twice_the_peak_with_the_policys_error(lstm_graph):
    f = GraphFacts(lstm_graph)

    def never(b: Budget):
        raise OutOfRoom(f"no room in {b.device_bytes}")

    with pytest.raises(OutOfRoom, match=f"no room in {int(budget_module.MAX_GROWTH * f.peak_bytes)}"):
        smallest_that_plans(f, f.smallest_budget, ("pool",), never)

    def broken(b: Budget):       # another error is not a question of room: it passes through
        raise PlanError("planner bug")

    with pytest.raises(PlanError, match="planner bug"):
        smallest_that_plans(f, f.smallest_budget, ("pool",), broken)
