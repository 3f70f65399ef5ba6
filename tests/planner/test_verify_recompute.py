"""Recomputation in a Program, made by hand from a small residual CNN's unlimited Program
(tests/planner/recompute_programs.py): a correct one verifies and trains bit for bit as the
unlimited run does on the sanitizing cpu backend; each way of getting one wrong is refused with
a message naming it; and the JSON form (swapengine.program/4) round-trips."""
import copy
import json

import numpy as np
import pytest

from engine.errors import UsageError
from engine.backends.cpu import CpuDevice
from engine.cli.plans import read_plan
from engine.program import COMPUTE, FORMAT, FORMAT_RECOMPUTE, SWAP_IN, Program, ProgramFormatError
from engine.training import Trainer
from planner.policy import unlimited_program
from planner.verify import VerificationError, verify
from tests.planner.recompute_programs import (cnn, compute_at, last_reader, node_named, recompute_before, recomputing_cnn,
                                              remove, serve)
from tests.planner.test_end_to_end import ITERATIONS, assert_trains_as_unlimited


@pytest.fixture(scope="module")
def graph():
    return cnn()


@pytest.fixture(scope="module")
def unlimited(graph):
    return unlimited_program(graph)


@pytest.fixture(scope="module")
def recomputing(graph, unlimited):
    return recomputing_cnn(graph, unlimited)


@pytest.fixture(scope="module")
def reference(graph):
    ref = Trainer(graph, seed=0)
    losses = [ref.step() for _ in range(ITERATIONS)]
    return ref.state, losses


def recompute_of(program, g, name):
    return next(i for i, ins in enumerate(program.instrs) if ins.recompute and ins.target == node_named(g, name))


def step_inputs(program, g, name):
    """The objects node ``name``'s step in the schedule read its inputs from."""
    node = g.nodes[node_named(g, name)]
    return program.instrs[compute_at(program, g, node.id)].objects[:len(node.inputs)]


# ---------------------------------------------------------------- a correct one
def test_the_hand_made_program_recomputes_pooling_relu_and_a_convolution(graph, recomputing):
    ops = sorted(graph.nodes[ins.target].op for ins in recomputing.instrs if ins.recompute)
    assert ops == ["conv2d", "global_avg_pool", "relu"]
    # each recomputation's copy is what a later compute reads: the step's copy is not
    for i, ins in enumerate(recomputing.instrs):
        if ins.recompute:
            node = graph.nodes[ins.target]
            made = set(ins.objects[len(node.inputs):])
            reader = recomputing.instrs[i + 1]
            assert made & set(reader.objects[:len(graph.nodes[reader.target].inputs)])


@pytest.mark.parametrize("captured", [True, False])
def test_a_correct_recomputation_verifies_and_trains_bit_identically(graph, recomputing, reference, captured,
                                                                       monkeypatch):
    """On the cpu backend's captured work lists and issued instruction by instruction (a
    backend that cannot capture): a recomputation is one more launch of its node."""
    if not captured:
        monkeypatch.setattr(CpuDevice, "capture", lambda self, issue: None)
    verify(recomputing, graph)
    assert_trains_as_unlimited(graph, recomputing, 0, *reference, "hand-made recomputations")


def test_without_its_recomputation_the_program_is_refused_and_would_train_wrong(graph, recomputing, reference):
    """The control: the reader of global_pool's recomputed copy, with the recomputation gone,
    reads a poisoned object. The verifier refuses it, and the run it would have been differs
    (so the bit-for-bit check above can fail)."""
    broken = copy.deepcopy(recomputing)
    remove(broken, recompute_of(broken, graph, "global_pool"))
    with pytest.raises(VerificationError, match="reads 'global_pool' from object .*, which holds nothing"):
        verify(broken, graph)
    with pytest.raises(AssertionError, match="differ"):
        assert_trains_as_unlimited(graph, broken, 0, *reference, "without the recomputation")


# ---------------------------------------------------------------- mutants the verifier refuses
def test_refuses_a_recomputation_reading_an_input_another_tensor_overwrote(graph, unlimited):
    """stage0/a/relu recomputed for its last reader, from the object its input sat in at its
    step: the next convolution's output has taken that object since."""
    p = unlimited
    node = node_named(graph, "stage0/a/relu")
    (obj,) = step_inputs(p, graph, "stage0/a/relu")
    mutant, at = recompute_before(p, graph, last_reader(p, graph, graph.nodes[node].outputs[0]), node, inputs=[obj])
    with pytest.raises(VerificationError, match=rf"instruction {at} \(recompute 'stage0/a/relu'\) reads "
                                                rf"'stage0/a/bn/apply' from object {obj}, which holds '[^']+' "
                                                r".*a read of a tensor that is not resident"):
        verify(mutant, graph)


def test_refuses_a_recomputation_reading_a_weight_updated_in_place(graph, unlimited):
    """stem/conv/conv recomputed after the SGD update wrote the next weight over the weight in
    place: the object holds the updated tensor, another value."""
    p = unlimited
    inputs = step_inputs(p, graph, "stem/conv/conv")
    after_update = compute_at(p, graph, node_named(graph, "stem/conv/w.update")) + 1
    mutant, at = recompute_before(p, graph, after_update, node_named(graph, "stem/conv/conv"), inputs=inputs)
    with pytest.raises(VerificationError, match=rf"instruction {at} \(recompute 'stem/conv/conv'\) reads "
                                                r"'stem/conv/w' from object \d+, which holds "
                                                r"'stem/conv/w.update:0'"):
        verify(mutant, graph)
    # the same recomputation before the update verifies
    verify(recompute_before(p, graph, after_update - 1, node_named(graph, "stem/conv/conv"), inputs=inputs)[0],
           graph)


@pytest.mark.parametrize("name,op", [("stage1/a/bn/stats", "batch_norm_stats"), ("stem/conv/w.update", "sgd_update")])
def test_refuses_recomputing_a_stateful_operator(graph, unlimited, name, op):
    """Its inputs are the very objects its step read, still holding what it read for batch norm:
    the refusal is about the operator, not the memory."""
    p = unlimited
    node = node_named(graph, name)
    at = compute_at(p, graph, node) + 1
    mutant, at = recompute_before(p, graph, at, node, inputs=step_inputs(p, graph, name))
    with pytest.raises(VerificationError, match=rf"instruction {at} \(recompute '{name}'\) runs '{name}' \({op}\) "
                                                r"again, .* it cannot be recomputed"):
        verify(mutant, graph)


def test_refuses_a_recomputation_writing_over_a_tensor_read_later(graph, unlimited):
    """global_pool recomputed into the object of the gradient its reader reads next."""
    p, at = serve(unlimited, graph, "global_pool")
    reader = p.instrs[at + 1]
    node = graph.nodes[reader.target]
    other = next(k for k, t in enumerate(node.inputs) if graph.tensors[t].name != "global_pool")
    live, obj = graph.tensors[node.inputs[other]].name, reader.objects[other]
    mutant, at = serve(unlimited, graph, "global_pool", outputs=[obj])
    with pytest.raises(VerificationError, match=rf"reads '{live}' from object {obj}, which holds 'global_pool' "
                                                rf"\(written by instruction {at} \(recompute 'global_pool'\)\)"):
        verify(mutant, graph)


def test_refuses_a_recomputation_before_the_nodes_own_step(graph, unlimited):
    node = node_named(graph, "global_pool")
    step = compute_at(unlimited, graph, node)
    mutant, at = recompute_before(unlimited, graph, step, node)
    assert at < compute_at(mutant, graph, node)
    with pytest.raises(VerificationError, match=rf"instruction {at} \(recompute 'global_pool'\) recomputes "
                                                r"'global_pool' before the schedule runs it"):
        verify(mutant, graph)


def test_refuses_a_recomputation_not_ordered_after_its_inputs_swap_in(graph, unlimited):
    mutant = recomputing_cnn(graph, unlimited, edge=False)
    at = recompute_of(mutant, graph, "stem/conv/conv")
    swap_in = mutant.instrs[at - 1]
    assert swap_in.kind == SWAP_IN and at - 1 not in mutant.instrs[at].deps
    with pytest.raises(VerificationError, match=rf"instruction {at} \(recompute 'stem/conv/conv'\) may read "
                                                rf"'images' from object {swap_in.obj} before instruction {at - 1} "
                                                r"\(swap_in 'images'\) finishes writing it: no edge orders them"):
        verify(mutant, graph)


# ---------------------------------------------------------------- JSON
def round_trip(p: Program) -> tuple[dict, Program]:
    d = json.loads(json.dumps(p.to_dict()))
    return d, Program.from_dict(d)


def flags(p: Program) -> list[int]:
    return [i for i, ins in enumerate(p.instrs) if ins.recompute]


def test_a_program_with_recomputations_round_trips_as_version_4(graph, recomputing):
    d, q = round_trip(recomputing)
    assert d["format"] == FORMAT_RECOMPUTE == "swapengine.program/4" and "mappings" not in d["arena"]
    assert sum(bool(i.get("recompute")) for i in d["instructions"]) == 3
    assert flags(q) == flags(recomputing) and q.recomputes == 3 and not q.arena.virtual
    assert q.to_dict() == recomputing.to_dict()
    verify(q, graph)


def test_a_program_with_recomputations_and_a_page_table_round_trips_as_version_4(graph, recomputing):
    p = copy.deepcopy(recomputing)
    a = p.arena
    a.mappings = np.array([[0, 0, a.scratch_offset]], np.int64)    # identity: the same bytes as before
    a.virtual_bytes = a.scratch_offset
    verify(p, graph)
    d, q = round_trip(p)
    assert d["format"] == FORMAT_RECOMPUTE and d["arena"]["mappings"] == [[0, 0, a.scratch_offset]]
    assert q.arena.virtual and np.array_equal(q.arena.mappings, a.mappings)
    assert q.arena.virtual_bytes == a.virtual_bytes and flags(q) == flags(p)
    assert q.to_dict() == p.to_dict()
    verify(q, graph)


def test_a_version_2_file_still_loads(graph, unlimited):
    d, q = round_trip(unlimited)
    assert d["format"] == FORMAT == "swapengine.program/2"
    assert q.recomputes == 0 and q.to_dict() == unlimited.to_dict()
    verify(q, graph)


def test_a_recompute_flag_in_a_version_2_file_is_refused_in_one_line(recomputing):
    """Only version 4 has recomputations: a version 2 file that claims one is malformed (read
    as version 2, its extra computes would run out of the schedule's order)."""
    d = recomputing.to_dict()
    d["format"] = FORMAT
    with pytest.raises(ProgramFormatError, match="which format swapengine.program/2 cannot hold") as e:
        Program.from_dict(d)
    assert "\n" not in str(e.value)


def test_recompute_on_a_swap_instruction_is_refused_in_one_line(recomputing, tmp_path):
    d = recomputing.to_dict()
    swap = next(i for i in d["instructions"] if i["kind"] == "swap_in")
    swap["recompute"] = True
    with pytest.raises(ProgramFormatError, match="only a compute instruction may be a recomputation") as e:
        Program.from_dict(d)
    assert "\n" not in str(e.value)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(d))
    with pytest.raises(UsageError, match=f"plan file '{path}': .*only a compute instruction may be a "
                                         "recomputation") as e:
        read_plan(str(path))
    assert "\n" not in str(e.value)
