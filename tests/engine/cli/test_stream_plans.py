"""Planning a stream of changing graphs: the plan cache's hits and misses on a known stream, the
gate refusing a plan made for another graph, and a short run on the cpu backend with the
sanitizer bit-identical to the unlimited run."""
import numpy as np
import pytest

import zoo
from engine import iteration_stream as st
from engine.autodiff import make_optimizer
from engine.backend_registry import choose
from engine.library.stream_plans import StalePlanError, StreamPlanner, WindowObserver, admit
from engine.op_monitor import Monitor, key_of
from engine.profile import analytic_profile
from engine.training import ReferenceRunner, StreamTrainer
from planner.facts import GraphFacts


def graphs():
    return st.IterationGraphs(lambda seq: zoo.build("gpt-tiny", size=seq, positions=16), make_optimizer("adamw"), 2)


def half_peak(g) -> int:
    return int(0.5 * GraphFacts(g.micro(16)).peak_bytes)


def test_plan_cache_hits_and_misses_on_a_known_stream():
    g = graphs()
    sp = StreamPlanner("smartswap", half_peak(g), analytic_profile("v100"))
    stream = [g.micro(8), g.micro(16), g.micro(8), g.evaluation(16), g.micro(8), g.micro(16)]
    for graph in stream:
        sp.plan(graph)
    assert (sp.cache.misses, sp.cache.hits) == (3, 3)
    assert len(sp.plan_seconds) == 3


def test_a_plan_for_another_graph_is_refused_not_run():
    g = graphs()
    sp = StreamPlanner("smartswap", half_peak(g), analytic_profile("v100"), choose("cpu"))
    entry8 = sp.plan(g.micro(8))
    with pytest.raises(StalePlanError, match="refused"):
        admit(entry8.program, g.micro(16), sp.device_bytes)
    # Poison the cache: the 16-token graph's key holds the 8-token plan. The gate refuses it
    # before any executor exists for it.
    key16 = key_of(sp.monitor.tokenizer.exact([g.micro(16)]))
    sp.cache.entries[key16] = type(entry8)(g.micro(8), entry8.program, entry8.seconds, entry8.policy)
    with pytest.raises(StalePlanError):
        sp.runner_for(g.micro(16))
    assert sp.cache.entries[key16].made is None
    sp.close()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")     # the forced non-finite step
def test_short_stream_on_cpu_with_sanitizer_is_bit_identical_to_the_unlimited_run():
    settings = st.StreamSettings((8, 12, 16), eval_every=6, accumulate=2, nonfinite_at=(3,), seed=0)
    g = graphs()
    mon = Monitor()
    sp = StreamPlanner("smartswap", half_peak(g), analytic_profile("v100"), choose("cpu"), sanitize=True,
                       monitor=mon)
    trainer = StreamTrainer(graphs(), st.IterationPlan(settings), sp.runner_for, after=WindowObserver(mon))
    runners = {}
    reference = StreamTrainer(graphs(), st.IterationPlan(settings), lambda x: runners.setdefault(x, ReferenceRunner(x)))
    try:
        for _ in range(14):
            a, b = trainer.step(), reference.step()
            assert a == b or not (np.isfinite(a) or np.isfinite(b))
    finally:
        sp.close()
    assert trainer.updates == reference.updates >= 2 and trainer.skipped == 1
    ours, ref = trainer.named_state(), reference.named_state()
    assert set(ours) == set(ref) and all(np.array_equal(ours[k], ref[k]) for k in ref)
    assert any(e.program.count(1) for e in sp.cache.entries.values())     # it did swap
    assert len(mon.log) >= 7
