"""Weights as persistent state: a parameter nothing updates (a forward-only graph's weights)
is its own next value (``Graph.state_pairs``), so it stays resident across iterations when
memory allows, and evicting it copies nothing (its host copy never goes stale)."""
import numpy as np

import zoo
from engine.graph_io import graph_from_dict, graph_to_dict
from engine.ir import Kind, PERSISTENT_KINDS
from engine.program import SWAP_IN, SWAP_OUT
from planner.facts import GraphFacts
from planner.policy import plan_with
from planner.verify import verify
from zoo.resnet import resnet


def small_resnet():
    return resnet(blocks=(1, 1, 1, 1), batch=2, size=32, classes=10, base_width=8)


def test_weights_nothing_updates_are_their_own_next_value():
    g = small_resnet()
    pairs = dict(g.state_pairs)
    weights = g.leaves(Kind.PARAMETER)
    assert weights and all(pairs[w] == w for w in weights)
    # batch norm's running statistics have a real next value
    stats = g.leaves(Kind.STATE)
    assert stats and all(pairs[s] != s for s in stats)


def test_training_graphs_have_no_unchanged_state():
    g = zoo.tiny("wresnet")
    assert g.state_pairs and all(cur != nxt for cur, nxt in g.state_pairs)
    assert {cur for cur, _ in g.state_pairs} == set(g.leaves(*PERSISTENT_KINDS))


def test_unchanged_pairs_survive_a_file_round_trip():
    g = small_resnet()
    back = graph_from_dict(graph_to_dict(g))
    assert back.state_pairs == g.state_pairs


def test_unlimited_forward_plan_moves_no_weights():
    g = small_resnet()
    program = plan_with("ideal", g)
    verify(program, g)
    weights = set(g.leaves(Kind.PARAMETER))
    assert weights <= set(program.initial_resident)
    moved = {i.target for i in program.instrs if i.kind in (SWAP_IN, SWAP_OUT)}
    assert not moved & weights
    images = g.leaves(Kind.INPUT)
    assert program.bytes_moved(g, SWAP_IN) == sum(g.tensors[t].nbytes for t in images)
    assert program.bytes_moved(g, SWAP_OUT) == 0


def test_a_weight_swapped_out_unchanged_moves_no_bytes():
    """Across budgets from the smallest to above the peak: no swap-out ever copies a weight,
    and somewhere a weight resident at the start is evicted and comes back in, its host copy
    (given at the start) still current."""
    g = small_resnet()
    facts = GraphFacts(g)
    weights = set(g.leaves(Kind.PARAMETER))
    evicted_resident = 0
    for budget in np.geomspace(facts.smallest_budget, 1.5 * facts.peak_bytes, 8).astype(int):
        program = plan_with("swapadvisor", g, int(budget))
        verify(program, g, int(budget))
        assert not [i for i in program.instrs if i.kind == SWAP_OUT and i.copy and i.target in weights]
        resident = weights & set(program.initial_resident)
        evicted_resident += sum(i.kind == SWAP_IN and i.target in resident for i in program.instrs)
    assert evicted_resident, "no budget evicted a resident weight: the case is not exercised"


def test_verifier_refuses_dropping_a_changed_state_without_a_copy():
    """The no-copy swap-out is allowed only for state nothing updates: BN statistics' next
    values still need their copy."""
    import dataclasses

    import pytest

    from planner.verify import VerificationError

    g = small_resnet()
    budget = GraphFacts(g).smallest_budget
    program = plan_with("swapadvisor", g, budget)
    nexts = {nxt for cur, nxt in g.state_pairs if cur != nxt}
    k = next(i for i, ins in enumerate(program.instrs) if ins.kind == SWAP_OUT and ins.copy and ins.target in nexts)
    instrs = list(program.instrs)
    instrs[k] = dataclasses.replace(instrs[k], copy=False)
    broken = dataclasses.replace(program, instrs=instrs)
    with pytest.raises(VerificationError):
        verify(broken, g, budget)


def test_weights_stay_resident_as_far_as_the_budget_allows():
    """Under a budget between the activations' needs and the peak, part of the weights stays
    resident across iterations (the allocation counts them around the iteration's end) and
    the rest streams in; more budget, more resident."""
    g = resnet(152, batch=1, size=64, classes=10, base_width=8)
    facts = GraphFacts(g)
    weights = set(g.leaves(Kind.PARAMETER))
    resident_bytes = []
    for fraction in (0.5, 0.8):
        budget = int(fraction * facts.peak_bytes)
        program = plan_with("swapadvisor", g, budget)
        verify(program, g, budget)
        resident = weights & set(program.initial_resident)
        streamed = {i.target for i in program.instrs if i.kind == SWAP_IN} & weights
        assert resident and streamed
        resident_bytes.append(sum(g.tensors[t].nbytes for t in resident))
    assert resident_bytes[1] > resident_bytes[0] > 0.3 * sum(g.tensors[t].nbytes for t in weights)


def test_inference_elementwise_ops_may_overwrite_their_inputs_training_ones_not():
    import pytest

    from engine.inplace import in_place_input
    from engine.ir import Graph, GraphError

    inference, training = small_resnet().nodes, zoo.tiny("wresnet").nodes
    adds = [n for n in inference if n.op == "add"]
    assert adds and all(in_place_input(n, 0) == 1 for n in adds)
    assert all(in_place_input(n, 0) == 0 for n in inference if n.op in ("relu", "batch_norm"))
    assert all(in_place_input(n, 0) is None for n in training if n.op in ("add", "relu", "batch_norm_apply"))
    g = Graph()
    a = g.input("a", (2,))
    with pytest.raises(GraphError, match="in_place"):
        g.apply("add", [a, a], inplace=True)
