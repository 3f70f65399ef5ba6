"""All-reduce instructions in a Program (issue 41): a swapping plan for one rank with its
gradients reduced in buckets verifies; the verifier rejects the mutants (an update moved before
its gradient's reduction, an update not waiting for it, a gradient never reduced, a reduction in
a one-rank plan); the simulator times each reduction as a ring on the profile's network; the
format is versioned (/5 for plans with ranks, earlier plans written and read as before)."""
import json
from dataclasses import replace

import numpy as np
import pytest

from engine.ir import Kind
from engine.library.models import model_graph
from engine.library.planning import plan
from engine.profile import Network, Profile, analytic_profile
from engine.program import ALLREDUCE, COMPUTE, FORMAT_RANKS, SWAP_OUT, Program
from planner.allreduce import add_allreduce, reduced_gradients
from planner.dispatch import NoNetwork
from planner.policy import get
from planner.simulate import simulate
from planner.verify import VerificationError, verify

RANKS = 4
NET = Network(bytes_per_s=10e9, latency_s=20e-6)


@pytest.fixture(scope="module")
def planned():
    g = model_graph("small-cnn", batch=4)
    p = plan(g, get("swapadvisor"), analytic_profile("v100"), 160 * 2**10)
    assert p.program.count(SWAP_OUT) > 0                    # the budget makes it swap
    return g, p.program, p.budget.device_bytes


def reduces(program: Program) -> list[int]:
    return [i for i, ins in enumerate(program.instrs) if ins.kind == ALLREDUCE]


def update_reading(g, program: Program, t: int) -> int:
    node = reduced_gradients(g)[t]
    return next(i for i, ins in enumerate(program.instrs) if ins.kind == COMPUTE and ins.target == node
                and not ins.recompute)


def moved(program: Program, src: int, dst: int, drop_deps_on_src: bool = True) -> Program:
    """``program`` with instruction ``src`` moved to just after ``dst`` (> src), deps renumbered;
    the instructions it passes stop depending on it (as a planner that moved it would)."""
    order = [i for i in range(len(program.instrs)) if i != src]
    order.insert(order.index(dst) + 1, src)
    new = {old: k for k, old in enumerate(order)}
    instrs = []
    for old in order:
        ins = program.instrs[old]
        deps = [d for d in ins.deps if not (drop_deps_on_src and d == src and old <= dst)]
        instrs.append(replace(ins, deps=sorted(new[d] for d in deps)))
    return replace(program, instrs=instrs)


def test_gradients_are_what_the_optimizer_reads(planned):
    g, _, _ = planned
    grads = reduced_gradients(g)
    assert len(grads) == len(g.leaves(Kind.PARAMETER))
    assert all(g.nodes[n].op == "sgd_update" and g.nodes[n].inputs[1] == t for t, n in grads.items())


def test_a_swapping_plan_with_bucketed_reductions_verifies(planned):
    g, program, budget = planned
    ranked = add_allreduce(program, g, RANKS, bucket_bytes=4096)
    verify(ranked, g, budget)
    buckets = [ranked.instrs[i].bucket for i in reduces(ranked)]
    reduced = [t for b in buckets for t in b]
    assert sorted(reduced) == sorted(reduced_gradients(g))  # each gradient once
    assert 1 < len(buckets) < len(reduced)                  # in buckets, not one by one nor all at once
    each = add_allreduce(program, g, RANKS, bucket_bytes=0)
    verify(each, g, budget)
    assert len(reduces(each)) > len(buckets)
    assert all(len(each.instrs[i].deps) == 1 for i in reduces(each))     # a bucket per compute making gradients
    # a bucket closes before the update that reads a member, however large it may grow
    unbounded = add_allreduce(program, g, RANKS, bucket_bytes=2**40)
    verify(unbounded, g, budget)
    assert 1 < len(reduces(unbounded)) <= len(buckets)


def test_an_update_moved_before_its_gradients_reduction_is_rejected(planned):
    g, program, budget = planned
    ranked = add_allreduce(program, g, RANKS, bucket_bytes=4096)
    a = reduces(ranked)[0]
    u = update_reading(g, ranked, ranked.instrs[a].target)
    assert a in ranked.instrs[u].deps
    mutant = moved(ranked, a, u)
    with pytest.raises(VerificationError, match=r"reads gradient '.*' before it is all-reduced across the 4 ranks"):
        verify(mutant, g, budget)


def test_an_update_that_does_not_wait_for_the_reduction_is_rejected(planned):
    g, program, budget = planned
    ranked = add_allreduce(program, g, RANKS, bucket_bytes=4096)
    # a reduction whose first waiter is an update reading one of its gradients (no other path
    # orders them once that edge is gone)
    a, u = next((a, u) for a in reduces(ranked)
                for u in [min(i for i, ins in enumerate(ranked.instrs) if a in ins.deps)]
                if ranked.instrs[u].kind == COMPUTE
                and set(g.nodes[ranked.instrs[u].target].inputs) & set(ranked.instrs[a].bucket))
    instrs = list(ranked.instrs)
    instrs[u] = replace(instrs[u], deps=[d for d in instrs[u].deps if d != a])
    with pytest.raises(VerificationError, match=r"before instruction .* \(allreduce .*\) finishes writing it"):
        verify(replace(ranked, instrs=instrs), g, budget)


def test_a_gradient_never_reduced_and_a_reduction_for_one_rank_are_rejected(planned):
    g, program, budget = planned
    ranked = add_allreduce(program, g, RANKS, bucket_bytes=0)     # one per gradient
    last = reduces(ranked)[-1]
    dropped = [replace(ins, deps=sorted(d - (d > last) for d in ins.deps if d != last))
               for i, ins in enumerate(ranked.instrs) if i != last]
    with pytest.raises(VerificationError, match="reads gradient|never all-reduces gradient"):
        verify(replace(ranked, instrs=dropped), g, budget)
    with pytest.raises(VerificationError, match="in a plan for one rank"):
        verify(replace(ranked, ranks=1), g, budget)
    with pytest.raises(VerificationError, match="reads gradient .* before it is all-reduced"):
        verify(replace(program, ranks=RANKS), g, budget)


def test_the_simulator_times_each_reduction_as_a_ring_on_the_network(planned):
    g, program, _ = planned
    ranked = add_allreduce(program, g, RANKS, bucket_bytes=4096)
    profile = replace(analytic_profile("v100"), network=NET)
    one, many = simulate(program, g, profile), simulate(ranked, g, profile)
    for i in reduces(ranked):
        nbytes = sum(g.tensors[t].nbytes for t in ranked.instrs[i].bucket)
        ring = 2 * (RANKS - 1) * NET.latency_s + 2 * (RANKS - 1) / RANKS * nbytes / NET.bytes_per_s
        assert many.finish[i] - many.start[i] == pytest.approx(ring, rel=1e-9)
    assert many.total >= one.total
    # the single-rank plan's instructions keep their times until the first reduction holds one up
    first = reduces(ranked)[0]
    assert np.allclose(many.finish[:first], one.finish[:first])
    with pytest.raises(NoNetwork, match="has no network link"):
        simulate(ranked, g, analytic_profile("v100"))


def test_the_format_is_versioned(planned):
    g, program, budget = planned
    plain = program.to_dict()
    assert plain["format"] != FORMAT_RANKS and "ranks" not in plain
    assert all("bucket" not in i for i in plain["instructions"])
    ranked = add_allreduce(program, g, RANKS, bucket_bytes=4096)
    d = json.loads(json.dumps(ranked.to_dict()))
    assert d["format"] == FORMAT_RANKS and d["ranks"] == RANKS
    back = Program.from_dict(d)
    assert back.ranks == RANKS and back.to_dict() == d
    verify(back, g, budget)
    old = dict(d, format=plain["format"])               # an all-reduce in an older format is not read
    with pytest.raises(Exception, match="malformed program"):
        Program.from_dict(old)


def test_a_profile_keeps_its_network():
    p = replace(analytic_profile("v100"), network=NET)
    assert Profile.from_dict(json.loads(json.dumps(p.to_dict()))).network == NET
    assert "network" not in analytic_profile("v100").to_dict()
    assert NET.ring_seconds(8e6, 1) == 0.0
    assert NET.ring_seconds(8e6, 4) == pytest.approx(6 * 20e-6 + 1.5 * 8e6 / 10e9)


def test_the_executor_refuses_a_plan_with_reductions_in_one_line(planned):
    from engine.backend_registry import choose
    from engine.executor import AllReduceUnsupported
    from engine.library.runners import executor

    g, program, _ = planned
    with pytest.raises(AllReduceUnsupported, match="runs only as a rank with a collective"):
        executor(add_allreduce(program, g, RANKS), g, choose("cpu", 0, None), False, 0)
