import copy

import numpy as np
import pytest

from engine.errors import EngineError
from engine.ir import Graph
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT, Arena, Instr, Program, sharing_objects
from planner.facts import GraphFacts
from planner.verify import VerificationError, verify


def test_planned_program_verifies(lstm_graph, tight_program):
    program, budget = tight_program
    verify(program, lstm_graph, budget)


def first(program, pred):
    return next(i for i, ins in enumerate(program.instrs) if pred(i, ins))


def test_rejects_a_removed_edge(lstm_graph, tight_program):
    p = copy.deepcopy(tight_program[0])
    # a compute that reads a tensor brought in by a swap-in, with that edge removed
    i = first(p, lambda i, ins: ins.kind == COMPUTE and any(p.instrs[d].kind == SWAP_IN for d in ins.deps))
    p.instrs[i].deps = [d for d in p.instrs[i].deps if p.instrs[d].kind != SWAP_IN]
    with pytest.raises(VerificationError, match="before instruction .* finishes writing it: no edge orders them"):
        verify(p, lstm_graph)


def test_rejects_two_live_tensors_in_one_object(lstm_graph, tight_program):
    p = copy.deepcopy(tight_program[0])
    g = lstm_graph
    # send the output of one compute into the object of an input of the same node that lives on
    for i, ins in enumerate(p.instrs):
        if ins.kind != COMPUTE:
            continue
        node = g.nodes[ins.target]
        out_obj = ins.objects[len(node.inputs)]
        same_size = [o for o in ins.objects[:len(node.inputs)]
                     if p.arena.object_bytes[o] == p.arena.object_bytes[out_obj] and o != out_obj]
        if same_size:
            objs = list(ins.objects)
            objs[len(node.inputs)] = same_size[0]
            ins.objects = tuple(objs)
            break
    else:
        pytest.fail("no compute with an input object the size of its output's")
    with pytest.raises(VerificationError, match="two live tensors in one object|does not allow"):
        verify(p, g)


def test_rejects_a_swap_in_before_its_swap_out(lstm_graph, tight_program):
    p = copy.deepcopy(tight_program[0])
    i = first(p, lambda i, ins: ins.kind == SWAP_IN and any(
        p.instrs[d].kind == SWAP_OUT and p.instrs[d].target == ins.target for d in ins.deps))
    out = next(d for d in p.instrs[i].deps if p.instrs[d].kind == SWAP_OUT and p.instrs[d].target == p.instrs[i].target)
    # move the swap-in to just before its swap-out, renumbering every edge
    moved = p.instrs.pop(i)
    p.instrs.insert(out, moved)
    old_to_new = {}
    for old in range(len(p.instrs)):
        old_to_new[old] = old if old < out or old > i else (out if old == i else old + 1)
    for ins in p.instrs:
        ins.deps = sorted(old_to_new[d] for d in ins.deps)
    moved.deps = [d for d in moved.deps if d < out]
    with pytest.raises(VerificationError, match="reads a host copy of .* that no earlier swap-out wrote"):
        verify(p, lstm_graph)


def test_rejects_a_tensor_in_an_object_too_small_for_it(lstm_graph, tight_program):
    p = copy.deepcopy(tight_program[0])
    g = lstm_graph
    i = first(p, lambda i, ins: ins.kind == SWAP_IN)
    t, o = p.instrs[i].target, p.instrs[i].obj
    size = g.tensors[t].nbytes
    p.arena.object_bytes = p.arena.object_bytes.copy()
    p.arena.object_bytes[o] = size - 1
    with pytest.raises(VerificationError, match=rf"places '{g.tensors[t].name}' \({size} bytes\) in object {o} "
                                                rf"of {size - 1} bytes"):
        verify(p, g)


def test_rejects_an_object_that_does_not_exist(lstm_graph, tight_program):
    p = copy.deepcopy(tight_program[0])
    i = first(p, lambda i, ins: ins.kind == SWAP_IN)
    p.instrs[i].obj = p.arena.num_objects
    with pytest.raises(VerificationError, match=f"in object {p.arena.num_objects}, which does not exist"):
        verify(p, lstm_graph)


def test_rejects_an_arena_over_budget(lstm_graph, tight_program):
    program, budget = tight_program
    with pytest.raises(VerificationError, match="over the budget"):
        verify(program, lstm_graph, device_bytes=program.arena.arena_bytes - 1)
    verify(program, lstm_graph, device_bytes=program.arena.arena_bytes)


def test_rejects_too_little_operator_scratch(lstm_graph, tight_program):
    p = copy.deepcopy(tight_program[0])
    scratch = GraphFacts(lstm_graph).scratch
    need, nid = scratch.bytes, scratch.node
    assert need > 0 and p.arena.scratch_bytes >= need
    p.arena.scratch_bytes = need - 1
    with pytest.raises(VerificationError, match=f"reserves {need - 1} bytes of operator scratch but "
                                                f"'{lstm_graph.nodes[nid].name}' .* needs {need}"):
        verify(p, lstm_graph)


def test_rejects_an_object_inside_the_scratch_region(lstm_graph, tight_program):
    p = copy.deepcopy(tight_program[0])
    last = int(np.argmax(p.arena.object_offset))
    p.arena.object_offset = p.arena.object_offset.copy()
    p.arena.object_offset[last] += 256         # its tail now overlaps the scratch after it
    with pytest.raises(VerificationError, match="lies outside the arena or in its scratch region"):
        verify(p, lstm_graph)


def test_rejects_lost_state(lstm_graph, tight_program):
    p = copy.deepcopy(tight_program[0])
    g = lstm_graph
    nexts = {nxt for _, nxt in g.state_pairs}
    i = first(p, lambda i, ins: ins.kind == SWAP_OUT and ins.target in nexts and
              all(ins.target not in (x.target,) for x in p.instrs[i + 1:] if x.kind == SWAP_OUT))
    del p.instrs[i]
    for ins in p.instrs:
        ins.deps = [d - (d > i) for d in ins.deps if d != i]
    with pytest.raises(VerificationError, match="would lose it|neither kept resident"):
        verify(p, g)


# ---------------------------------------------------------------- objects that share bytes
KIB = 1024


def two_input_graph():
    """x -> a = relu(x); out = add(a, y): three 1 KiB tensors live at ``out``."""
    g = Graph("shared")
    x = g.input("x", (256,))
    y = g.input("y", (256,))
    (a,) = g.apply("relu", [x], name="a")
    g.apply("add", [a, y], name="out")
    return g


def arena(*ranges):
    """Objects at the given (offset, bytes), no scratch, the arena just large enough."""
    off = np.array([r[0] for r in ranges], np.int64)
    size = np.array([r[1] for r in ranges], np.int64)
    return Arena(off, size, int((off + size).max()), 0, {"name": "test"})


# Objects 0, 1, 2, 4 are disjoint 1 KiB ranges; object 3 straddles objects 0 and 1.
SHARED = [(0, KIB), (KIB, KIB), (2 * KIB, KIB), (KIB // 2, KIB), (3 * KIB, KIB)]


def shared_program(a_obj=2, y_deps=(1,)):
    """x swapped into object 0; a = relu(x) into ``a_obj``; y swapped into object 3 (which shares
    bytes with objects 0 and 1) after ``y_deps``; out = add(a, y) into object 4."""
    g = two_input_graph()
    instrs = [Instr(SWAP_IN, 0, 0),
              Instr(COMPUTE, 0, objects=(0, a_obj), deps=[0]),
              Instr(SWAP_IN, 1, 3, deps=list(y_deps)),
              Instr(COMPUTE, 1, objects=(a_obj, 3, 4), deps=[2])]
    return g, Program(g.name, [0, 1], arena(*SHARED), instrs, {})


def test_sharing_objects_lists_the_byte_ranges_that_meet():
    assert sharing_objects(arena(*SHARED)) == [[3], [3], [], [0, 1], []]
    # touching ranges share nothing; an empty object shares nothing
    assert sharing_objects(arena((0, KIB), (KIB, KIB), (KIB // 2, 0))) == [[], [], []]


def test_objects_sharing_bytes_used_one_after_the_other_verify():
    g, p = shared_program()
    verify(p, g)
    verify(p, g, device_bytes=4 * KIB)
    # the swap-in into object 3 must wait for the compute that last read object 0's bytes
    g, p = shared_program(y_deps=())
    with pytest.raises(VerificationError, match=r"instruction 2 \(swap_in 'y'\) may overwrite object 3, which "
                                                r"shares bytes with object 0, while instruction 1 \(compute 'a'\) "
                                                r"still uses 'x' there: no edge orders them"):
        verify(p, g)


def test_rejects_two_live_tensors_in_objects_that_share_bytes():
    # a lives in object 1 while y is swapped into object 3, which shares bytes with it
    g, p = shared_program(a_obj=1)
    with pytest.raises(VerificationError, match=r"reads 'a' from object 1, which holds nothing .*two live "
                                                r"tensors in one object"):
        verify(p, g)
    # the same program with the objects apart verifies
    p.arena = arena((0, KIB), (KIB, KIB), (2 * KIB, KIB), (4 * KIB, KIB), (3 * KIB, KIB))
    verify(p, g)


def test_rejects_initial_residents_in_objects_that_share_bytes(lstm_graph):
    from planner.policy import unlimited_program
    p = unlimited_program(lstm_graph)
    verify(p, lstm_graph)
    (t0, o0), (t1, o1) = list(p.initial_resident.items())[:2]
    p.arena.object_offset = p.arena.object_offset.copy()
    p.arena.object_offset[o1] = p.arena.object_offset[o0]
    p.arena.object_bytes = p.arena.object_bytes.copy()
    p.arena.object_bytes[o1] = max(p.arena.object_bytes[o1], p.arena.object_bytes[o0])
    with pytest.raises(VerificationError, match=f"both start in object {o1} \\(which shares bytes with object {o0}\\)"):
        verify(p, lstm_graph)


def test_rejects_an_output_over_bytes_its_input_still_occupies():
    """An operator reads its inputs while it writes its outputs: an output may share an input's
    memory only as the operator's declared in-place output in the very same object."""
    g = two_input_graph()
    instrs = [Instr(SWAP_IN, 0, 0), Instr(COMPUTE, 0, objects=(0, 3), deps=[0]),
              Instr(SWAP_IN, 1, 2), Instr(COMPUTE, 1, objects=(3, 2, 4), deps=[2])]
    p = Program(g.name, [0, 1], arena(*SHARED), instrs, {})
    with pytest.raises(VerificationError, match=r"writes output 'a' into object 3, which shares bytes with "
                                                r"object 0 holding its input 'x'"):
        verify(p, g)


def test_rejects_two_outputs_of_one_operator_in_the_same_bytes():
    """One kernel writes all its outputs: two of them in shared bytes cannot both survive."""
    g = Graph("two outputs")
    x = g.input("x", (2, 256))
    g.apply("split", [x], name="halves", axis=0, sizes=(1, 1))
    instrs = [Instr(SWAP_IN, 0, 0), Instr(COMPUTE, 0, objects=(0, 1, 2), deps=[0])]
    ok = Arena(np.array([0, 2 * KIB, 3 * KIB], np.int64), np.array([2 * KIB, KIB, KIB], np.int64), 4 * KIB, 0)
    verify(Program(g.name, [0], ok, instrs, {}), g)
    overlapping = Arena(np.array([0, 2 * KIB, 2 * KIB + KIB // 2], np.int64),
                        np.array([2 * KIB, KIB, KIB], np.int64), 4 * KIB, 0)
    with pytest.raises(VerificationError, match=r"writes outputs 'halves:0' and 'halves:1' into the same bytes "
                                                r"\(objects 1 and 2\)"):
        verify(Program(g.name, [0], overlapping, instrs, {}), g)
    same = Arena(np.array([0, 2 * KIB], np.int64), np.array([2 * KIB, KIB], np.int64), 3 * KIB, 0)
    with pytest.raises(VerificationError, match="into the same bytes"):
        verify(Program(g.name, [0], same, [Instr(SWAP_IN, 0, 0), Instr(COMPUTE, 0, objects=(0, 1, 1), deps=[0])],
                       {}), g)


def test_verification_error_is_an_engine_error():
    assert issubclass(VerificationError, EngineError) and issubclass(VerificationError, ValueError)


@pytest.mark.parametrize("field,message", [("schedule", "the schedule names node"),
                                           ("compute", "names node"), ("swap", "names tensor"),
                                           ("resident", "the initial residents name tensor")])
def test_rejects_ids_out_of_range_in_one_line(lstm_graph, tight_program, field, message):
    """A loaded plan may name anything: an id out of range is a VerificationError, not an IndexError."""
    import copy
    p = copy.deepcopy(tight_program[0])
    far = 10**6
    if field == "schedule":
        p.schedule[0] = far
    elif field == "resident":
        p.initial_resident[far] = 0
    else:
        kind = COMPUTE if field == "compute" else SWAP_IN
        i = next(i for i, ins in enumerate(p.instrs) if ins.kind == kind)
        p.instrs[i].target = far
    with pytest.raises(VerificationError, match=message):
        verify(p, lstm_graph)
