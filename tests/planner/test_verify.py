import copy

import numpy as np
import pytest

from engine.program import COMPUTE, SWAP_IN, SWAP_OUT
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
        same_class = [o for o in ins.objects[:len(node.inputs)]
                      if p.pool.object_class[o] == p.pool.object_class[out_obj] and o != out_obj]
        if same_class:
            objs = list(ins.objects)
            objs[len(node.inputs)] = same_class[0]
            ins.objects = tuple(objs)
            break
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


def test_rejects_an_over_full_class(lstm_graph, tight_program):
    p = copy.deepcopy(tight_program[0])
    pool = p.pool
    k = 0
    extra_offset = pool.arena_bytes
    pool.object_offset = np.append(pool.object_offset, extra_offset)
    pool.object_bytes = np.append(pool.object_bytes, pool.object_bytes[pool.object_class == k][0])
    pool.object_class = np.append(pool.object_class, k)
    pool.arena_bytes += int(pool.object_bytes[-1])
    with pytest.raises(VerificationError, match=r"size class 0 has \d+ objects but its count is \d+ \(over-full class\)"):
        verify(p, lstm_graph)


def test_rejects_an_arena_over_budget(lstm_graph, tight_program):
    program, budget = tight_program
    with pytest.raises(VerificationError, match="over the budget"):
        verify(program, lstm_graph, budget=program.pool.arena_bytes - 1)


def test_rejects_too_little_operator_scratch(lstm_graph, tight_program):
    p = copy.deepcopy(tight_program[0])
    need, nid = lstm_graph.scratch_bytes()
    assert need > 0 and p.pool.scratch_bytes >= need
    p.pool.scratch_bytes = need - 1
    with pytest.raises(VerificationError, match=f"reserves {need - 1} bytes of operator scratch but "
                                                f"'{lstm_graph.nodes[nid].name}' .* needs {need}"):
        verify(p, lstm_graph)


def test_rejects_an_object_inside_the_scratch_region(lstm_graph, tight_program):
    p = copy.deepcopy(tight_program[0])
    last = int(np.argmax(p.pool.object_offset))
    p.pool.object_offset = p.pool.object_offset.copy()
    p.pool.object_offset[last] += 256         # its tail now overlaps the scratch after it
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
