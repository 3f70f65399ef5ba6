"""Policy ``tflms`` (TFLMS v1 as published): IBM's defaults are the ones applied, nothing tuned;
every forward activation a backward operator reads is swapped except ATOMIC_TYPES' outputs (and
1-D tensors are not skipped: that rule is TFLMSv2's); parameters, optimizer state and inputs stay;
each swap-in waits for the chain rule's control operator; the plan verifies and trains
bit-identically; and on a model where tuning matters it is slower than the tuned lms."""
import pytest

import zoo
from engine.ir import Kind
from engine.profile import analytic_profile
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT
from engine.training import Trainer
from planner import policy
from planner.online_program import StepFacts
from planner.errors import PlanError
from planner.policies.lms import LmsOutOfMemory
from planner.policies.tflms import (EXCLUDED_OPS, PUBLISHED, TflmsSettings, chain_rule, plan_tflms, settings_of,
                                    swap_points, swapped_readers)
from planner.policies.tflms_graph import Phases, reaches
from planner.policies.tflms_v2 import (EXCLUDED_OPS as V2_EXCLUDED, PUBLISHED_V2, TflmsV2Settings, groupby,
                                       levels_in_order, sequential_controls, swap_records)
from planner.simulate import simulate
from planner.verify import verify

from .test_lms import assert_trains_like_unlimited, full_budget, request


def copied_out(program) -> set[int]:
    return {i.target for i in program.instrs if i.kind == SWAP_OUT}


def test_the_published_defaults_are_applied():
    # IBM tflmsv1 lms.py, LMS.__init__: lb=1, ub=10000, n_tensors=-1 (every tensor)
    assert PUBLISHED == TflmsSettings(lb=1, ub=10000, n_tensors=-1)
    g = zoo.tiny("rnn")
    req = request(g, int(1.5 * full_budget(g)), analytic_profile("v100"))
    assert settings_of(req) == PUBLISHED            # a profile does not make it tune, unlike lms
    assert policy.get("tflms").make(req).instrs == plan_tflms(req, PUBLISHED).instrs
    fewer = policy.PlanRequest(g, req.facts, req.budget, req.profile, allocator="bestfit",
                               policy_options={"n_tensors": 3})
    assert len(copied_out(policy.get("tflms").make(fewer))) < len(copied_out(plan_tflms(req)))


@pytest.mark.parametrize("family", ["wresnet", "rnn"])
def test_every_candidate_moves_and_only_candidates(family):
    g = zoo.tiny(family)
    b = full_budget(g)
    program = plan_tflms(request(g, b))
    verify(program, g, b)
    ph = Phases(g, program.schedule)
    state_next = {nxt for _, nxt in g.state_pairs}
    out = copied_out(program)
    for t in out:
        tensor = g.tensors[t]
        if tensor.kind != Kind.ACTIVATION:          # variables never move; next values left at the end
            assert t in state_next, tensor.name
            continue
        assert g.nodes[g.producer[t]].op not in EXCLUDED_OPS, tensor.name
        assert ph.forward[g.producer[t]]
    # no threshold: every forward activation with a backward reader that has a level moves
    candidates = {t for t, k in enumerate(g.tensors) if swapped_readers(g, ph, t)}
    assert candidates and candidates <= out
    if family == "rnn":         # the gates' products (mul) are read by backward operators, and stay
        assert any(g.nodes[g.producer[t]].op in EXCLUDED_OPS and any(ph.backward[r] for r in ph.readers[t])
                   and t not in out for t in range(len(g.tensors)) if g.producer[t] >= 0)
    if family == "wresnet":     # batch-norm mean and variance: 1-D, swapped by v1 (TFLMSv2 skips them)
        assert any(len(g.tensors[t].shape) <= 1 for t in candidates)
    assert any(g.tensors[t].kind == Kind.PARAMETER for t in program.initial_resident)    # variables resident


def test_levels_are_topos_levels():
    g = zoo.tiny("wresnet")
    ph = Phases(g, g.default_order())
    fw = [ph.level[i] for i in range(len(g.nodes)) if ph.forward[i]]
    bw = [ph.level[i] for i in range(len(g.nodes)) if ph.backward[i] and ph.level[i] >= 0]
    assert min(fw) == 0 and max(fw) < ph.bw_start == min(bw)
    assert all(ph.level[i] == -1 for i in range(len(g.nodes)) if ph.update[i])
    for node in g.nodes:        # a level is the longest path: one more than the deepest producer's
        if ph.level[node.id] > 0:
            assert ph.level[node.id] > max(ph.level[g.producer[t]] for t in node.inputs if g.producer[t] >= 0)


def test_swap_ins_wait_for_the_chain_rule_s_control_operator():
    g = zoo.tiny("wresnet")
    program = plan_tflms(request(g, full_budget(g)))
    steps = StepFacts(g, program.schedule)
    ph = Phases(g, program.schedule)
    computes = [k for k, ins in enumerate(program.instrs) if ins.kind == COMPUTE]
    pos, checked = -1, 0
    position = {nid: p for p, nid in enumerate(program.schedule)}
    for k, ins in enumerate(program.instrs):
        if ins.kind == COMPUTE:
            pos += 1
            continue
        t = ins.target
        if ins.kind != SWAP_IN or g.tensors[t].kind != Kind.ACTIVATION:
            continue
        reader = next(u for u in steps.uses[t] if u > pos)
        ctrl = chain_rule(g, ph, g.producer[t], program.schedule[reader], 1, 10000,
                          lambda c: max(c, key=position.__getitem__))
        if ctrl < 0:                # none found (at the loss): no control edge, in right after the swap-out
            assert pos + 1 == max(u for u in steps.uses[t] if u <= pos) + 1, g.tensors[t].name
            continue
        assert ph.backward[ctrl], g.tensors[t].name
        assert ph.level[g.producer[t]] < ph.level[ctrl] < ph.level[program.schedule[reader]]
        if ph.level[program.schedule[reader]] - 1 >= ph.bw_start:
            # the chain rule: the control operator reads an output of a forward operator downstream
            # of the producer (TFLMS walks forward from it through forward operators)
            downstream = forward_descendants(g, ph, g.producer[t])
            assert any(g.producer[x] in downstream for x in g.nodes[ctrl].inputs if g.producer[x] >= 0)
        # the swap-in starts after that operator (or just before its reader if it runs later)
        start = min(position[ctrl] + 1, reader)
        assert pos + 1 == start and computes[start - 1] in ins.deps, g.tensors[t].name
        checked += 1
    assert checked > 0


def forward_descendants(g, ph, nid) -> set[int]:
    seen, todo = set(), [nid]
    while todo:
        for c in ph.consumers(g, todo.pop()):
            if not ph.backward[c] and c not in seen:
                seen.add(c)
                todo.append(c)
    return seen


def test_out_of_memory_is_one_line():
    g = zoo.tiny("rnn")
    with pytest.raises(LmsOutOfMemory) as e:
        plan_tflms(request(g, int(0.5 * full_budget(g))))
    assert "\n" not in str(e.value) and str(e.value).startswith("tflms (lb=1, ub=10000, n_tensors=-1) is out of memory")


def test_slower_than_the_tuned_lms_where_tuning_matters():
    g = zoo.tiny("rnn")
    prof = analytic_profile("v100")
    req = request(g, int(1.2 * full_budget(g)), prof)
    published, tuned = plan_tflms(req), policy.get("lms").make(req)
    assert simulate(published, g, prof).total > 1.05 * simulate(tuned, g, prof).total
    assert published.count(SWAP_IN) > tuned.count(SWAP_IN)      # no threshold: it moves what lms keeps


@pytest.mark.parametrize("family", ["rnn", "wresnet"])
def test_bit_identical_to_the_unlimited_run(family):
    g = zoo.tiny(family)
    ref = Trainer(g, seed=0)
    ref_losses = [ref.step() for _ in range(2)]
    for i, f in enumerate((1.0, 1.2)):
        b = int(f * full_budget(g))
        program = plan_tflms(request(g, b))
        verify(program, g, b)
        assert program.count(SWAP_IN) > 0
        assert_trains_like_unlimited(g, program, ref, ref_losses, i, f"{family} tflms at {b} bytes")


def test_swap_points_follow_the_schedule_given():
    """Levels come from the graph, positions from the schedule: a swap-in never lands after its reader."""
    g = zoo.tiny("brnn")
    steps = StepFacts(g, g.default_order())
    points = swap_points(g, steps)
    evicted_after = {t: a for a, ts in enumerate(points.out_after) for t in ts}
    for b, ts in enumerate(points.in_before):
        for t in ts:
            assert any(u >= b for u in steps.uses[t]) and b > min(steps.uses[t])
    assert evicted_after and all(t in {x for ts in points.copy_after for x in ts} for t in evicted_after)


# ------------------------------------------------------------------ version v2 (TFLMSv2's first defaults)
def v2_request(g, b, **options):
    facts = request(g, b).facts
    return policy.PlanRequest(g, facts, request(g, b).budget, None, allocator="bestfit",
                              policy_options={"version": "v2", **options})


def test_v2_defaults_and_an_unknown_version():
    g = zoo.tiny("rnn")
    assert settings_of(v2_request(g, full_budget(g))) == PUBLISHED_V2 == TflmsV2Settings(-1, 0, -1)
    with pytest.raises(PlanError) as e:
        settings_of(policy.PlanRequest(g, request(g, full_budget(g)).facts, policy_options={"version": "v3"}))
    assert "\n" not in str(e.value) and "unknown version 'v3'" in str(e.value)


def test_v2_groups_readers_within_groupby_levels():
    assert groupby([9, 1, 2, 5, 6], 1) == [[1, 2], [5, 6], [9]]
    assert groupby([9, 1, 2, 5, 6], 0) == [[1], [2], [5], [6], [9]]
    assert groupby([9, 1, 2, 5, 6], 3) == [[1, 2, 5, 6, 9]]


@pytest.mark.parametrize("family", ["wresnet", "brnn"])
def test_v2_swaps_what_is_half_the_levels_away_and_nothing_1d(family):
    g = zoo.tiny(family)
    b = int(1.5 * full_budget(g))
    program = policy.get("tflms").make(v2_request(g, b))
    verify(program, g, b)
    ph = Phases(g, program.schedule)
    half = (max(ph.depth) + 1) // 2                    # LMS.run: self._topo_sort.size//2
    state_next = {nxt for _, nxt in g.state_pairs}
    far = {t for t in range(len(g.tensors)) if g.producer[t] >= 0 and len(g.tensors[t].shape) > 1
           and not ph.update[g.producer[t]] and g.nodes[g.producer[t]].op not in V2_EXCLUDED
           and any(ph.depth[r] - ph.depth[g.producer[t]] > half for r in ph.readers[t])}
    out = copied_out(program) - state_next
    assert far and out == far                          # forward or backward alike, by level distance only
    assert all(len(g.tensors[t].shape) > 1 for t in out)


def test_v2_swap_ins_are_chained_by_reader_level():
    """The sequential strategy: the first reader level's swap-ins are controlled from at least 3
    levels ahead, each later one's from below the previous reader level, within 10 levels."""
    g = zoo.tiny("wresnet")
    steps = StepFacts(g, g.default_order())
    ph = Phases(g, steps.schedule)
    swaps = swap_records(g, ph, steps, (max(ph.depth) + 1) // 2, 0)
    ctrl = sequential_controls(g, ph, swaps, levels_in_order(ph, steps.schedule))
    levels = sorted({ph.depth[r] for _, _, r in swaps})
    assert len(levels) > 2 and sum(c >= 0 for c in ctrl.values()) > len(ctrl) // 2
    for (t, r), c in ctrl.items():
        if c < 0:
            continue
        k = levels.index(ph.depth[r])
        below = levels[0] - 3 if k == 0 else levels[k - 1]
        assert ph.depth[g.producer[t]] < ph.depth[c] < below and ph.depth[c] >= below - 10
        assert reaches(g, ph, c, r)


def test_v2_bit_identical_to_the_unlimited_run():
    g = zoo.tiny("rnn")
    ref = Trainer(g, seed=0)
    ref_losses = [ref.step() for _ in range(2)]
    b = int(1.2 * full_budget(g))
    program = policy.get("tflms").make(v2_request(g, b))
    verify(program, g, b)
    assert program.count(SWAP_IN) > 0
    assert_trains_like_unlimited(g, program, ref, ref_losses, 3, f"rnn tflms v2 at {b} bytes")
