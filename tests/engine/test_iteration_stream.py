"""Iterations whose graph changes: what each iteration runs, and state carried across graphs."""
import numpy as np
import pytest

import zoo
from engine import iteration_stream as st
from engine.autodiff import make_optimizer
from engine.training import ReferenceRunner, StreamTrainer


def graphs(accumulate=2):
    return st.IterationGraphs(lambda seq: zoo.build("gpt-tiny", size=seq, positions=16), make_optimizer("adamw"),
                              accumulate)


def test_plan_evaluates_every_k_accumulates_and_forces_non_finite_steps():
    plan = st.IterationPlan(st.StreamSettings((8, 12, 16), eval_every=5, accumulate=2, nonfinite_at=(2,), seed=1))
    steps = [plan.step(i) for i in range(10)]
    assert [s.kind for s in steps] == ["train"] * 4 + ["eval"] + ["train"] * 4 + ["eval"]
    assert [s.ends_window for s in steps if s.kind == "train"] == [False, True] * 4
    assert {s.seq for s in steps if s.kind == "train"} <= {8, 12, 16}
    assert all(s.seq == 16 for s in steps if s.kind == "eval")
    assert steps[2].loss_scale == float("inf") and steps[3].loss_scale == 1.0
    assert [plan.step(i) for i in range(10)] == steps                # a function of (settings, i)


@pytest.mark.parametrize("bad", [st.StreamSettings(accumulate=0), st.StreamSettings(eval_every=1),
                                 st.StreamSettings(buckets=(0, 4))])
def test_bad_settings_are_one_line_errors(bad):
    with pytest.raises(st.StreamError):
        st.IterationPlan(bad)


def test_buckets_parse():
    assert st.buckets_of("16, 8,12") == (8, 12, 16)
    with pytest.raises(st.StreamError, match="8,12,16"):
        st.buckets_of("8;12")


def test_graphs_share_state_by_name_and_the_update_is_separate():
    g = graphs()
    micro8, micro16, ev = g.micro(8), g.micro(16), g.evaluation(16)
    update = g.update(micro16)
    names = lambda graph, kinds: {graph.tensors[t].name for t in graph.leaves(*kinds)}
    from engine.ir import Kind
    assert names(micro8, [Kind.PARAMETER]) == names(micro16, [Kind.PARAMETER]) == names(ev, [Kind.PARAMETER])
    assert {n.op for n in update.nodes} >= {"adam_update"} and "adam_update" not in {n.op for n in micro8.nodes}
    assert all(n.op != "softmax_cross_entropy_grad" for n in ev.nodes)
    assert len(st.accumulators(micro8)) == len(micro8.leaves(Kind.PARAMETER))


def test_a_non_finite_window_skips_its_update_and_zeroes_the_accumulators():
    settings = st.StreamSettings((8, 16), eval_every=0, accumulate=2, nonfinite_at=(1,), seed=0)
    runners = {}
    tr = StreamTrainer(graphs(), st.IterationPlan(settings), lambda g: runners.setdefault(g, ReferenceRunner(g)))
    wte0 = None
    for i in range(4):
        loss = tr.step()
        if i == 0:
            wte0 = tr.values["wte"].copy()
        if i == 1:
            assert not np.isfinite(loss)
            assert tr.skipped == 1 and tr.updates == 0
            assert np.array_equal(tr.values["wte"], wte0)           # no update ran
            assert all(not a.any() for k, a in tr.values.items() if k.endswith(st.ACC_SUFFIX))
    assert tr.updates == 1 and np.isfinite(tr.values["wte"]).all()
    assert not np.array_equal(tr.values["wte"], wte0)
