"""planner/policies/full_recompute.py: Megatron's full recomputation, each layer's forward run
again before its backward, on the zoo's decoders."""
import pytest

import zoo
from engine.ir import Kind
from engine.layer_scopes import layer_of_nodes
from engine.liveness import peak_bytes
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT
from engine.profile import analytic_profile
from planner.errors import PlanError
from planner.facts import GraphFacts
from planner.policies.full_recompute import recomputed_steps
from planner.policy import plan_with
from planner.simulate import simulate
from planner.smartswap.layers import FORWARD, phases
from planner.stalls import stall_report
from planner.verify import VerificationError, verify

from tests.zoo.helpers import differs_from_unlimited

from .recompute_programs import remove


@pytest.fixture(scope="module")
def graph():
    return zoo.build("llama-2-16-2", batch=4, size=32, vocab=11)


def test_each_layers_forward_runs_again_once_before_its_backward(graph):
    g, order = graph, GraphFacts(graph).order
    layer, phase = layer_of_nodes(g), phases(g, order)
    steps = recomputed_steps(g, order)
    assert [n for n, again in steps if not again] == list(order)
    forward = {int(n) for n, ph in zip(order, phase) if ph == FORWARD}
    again = [n for n, a in steps if a]
    assert len(again) == len(set(again)) and set(again) <= forward
    assert {int(layer[n]) for n in again} == {0, 1}                 # both layers, nothing outside them
    in_layer = [n for n in order if layer[n] == 0 and n in forward]
    assert [n for n in again if layer[n] == 0] == [n for n in in_layer if n in again]    # forward order
    pos = {n: i for i, (n, a) in enumerate(steps) if not a}
    first_backward = min(pos[n] for n, ph in zip(order, phase) if ph != FORWARD)
    recomputed_at = [i for i, (_, a) in enumerate(steps) if a]
    assert min(recomputed_at) > first_backward                      # in the backward pass
    # the layers' heavy tensors are among the recomputed: attention's scores and the MLP's
    names = {g.nodes[n].name for n in again}
    assert {"block0/attn/scores", "block0/attn/probs", "block1/mlp/gated"} <= names
    assert not any(g.tensors[t].kind == Kind.GRADIENT for n in again for t in g.nodes[n].outputs)


def test_a_verified_program_below_the_in_memory_peak_copies_only_the_batch(graph):
    g = graph
    budget = int(0.8 * peak_bytes(g))
    program = plan_with("full_recompute", g, budget)
    verify(program, g, budget)
    again = sum(a for _, a in recomputed_steps(g, GraphFacts(g).order))
    assert program.recomputes == again
    batch = set(g.leaves(Kind.INPUT, Kind.LABEL))
    assert {i.target for i in program.instrs if i.kind == SWAP_IN} == batch
    assert program.count(SWAP_OUT) == 0 and not set(program.initial_resident) - {c for c, _ in g.state_pairs}
    assert plan_with("ideal", g).arena.arena_bytes > budget           # in memory, it would not fit
    stalls = stall_report(program, g, simulate(program, g, analytic_profile("910b")))
    assert stalls.recomputes == again and stalls.recomputed_bytes == sum(    # rms_norm recreates two outputs
        g.tensors[t].nbytes for i in program.instrs if i.recompute for t in g.nodes[i.target].outputs)
    with pytest.raises(PlanError, match="finds no room"):
        plan_with("full_recompute", g, int(0.5 * peak_bytes(g)))


def test_without_a_recomputation_the_program_is_refused(graph):
    g = graph
    budget = int(0.8 * peak_bytes(g))
    program = plan_with("full_recompute", g, budget)
    probs = next(i for i, ins in enumerate(program.instrs) if ins.kind == COMPUTE and ins.recompute
                 and g.nodes[ins.target].name == "block1/attn/probs")
    remove(program, probs)
    with pytest.raises(VerificationError):
        verify(program, g, budget)


def test_a_graph_without_layers_is_refused_in_one_line():
    with pytest.raises(PlanError, match=r"full_recompute: graph .* has no layers \(nodes named block<i>/"):
        plan_with("full_recompute", zoo.tiny("rnn"), 10**9)


@pytest.mark.parametrize("model", ["llama-2-16-2", "gpt-2-16-2"])
def test_bit_identical_to_the_unlimited_run_with_the_sanitizer(model):
    g = zoo.build(model, batch=4, size=32, vocab=11)
    budget = int(0.8 * peak_bytes(g))
    program = plan_with("full_recompute", g, budget)
    verify(program, g, budget)
    assert program.recomputes > 0
    bad = differs_from_unlimited(g, program, backend_seed=2)
    assert not bad, bad[:3]
