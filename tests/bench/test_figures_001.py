"""bench/figures_001.py: the blind setting (001's: the schedule does not know the allocator) and the
capped one (ours) on a tiny DenseNet, checked for what each cell promises."""
import pytest

import zoo
from bench import figures_001 as f
from engine.profile import analytic_profile
from planner.facts import GraphFacts

GIB = 2**30


def test_the_ladder_walks_one_halving_in_equal_steps():
    rungs = f.ladder(16 * GIB)
    assert rungs[0] == 16 * GIB and rungs[-1] == 8 * GIB and len(rungs) == f.LADDER_STEPS + 1
    assert all(abs(a / b - 2 ** (1 / f.LADDER_STEPS)) < 1e-6 for a, b in zip(rungs, rungs[1:]))


@pytest.fixture(scope="module")
def tiny():
    g = zoo.build("densenet-121", batch=64, size=64, blocks=(2, 2), growth=8, classes=10)   # 33 MiB peak
    facts = GraphFacts(g)
    profile = analytic_profile(f.PROFILE)
    return g, facts, profile, profile.node_seconds(g)


def test_a_blind_cell_fits_the_device_at_the_budget_it_names(tiny):
    g, facts, profile, secs = tiny
    device = int(0.7 * (facts.peak_bytes + facts.scratch.bytes))        # it must swap
    configs = f.configurations(2 << 20, blind=True)
    runs = f.blind(g, facts, profile, secs, device, configs)
    assert set(runs) == {label for label, _, _ in configs}
    assert runs["blind schedule + VA"].seconds is not None               # on the schedule's own chunks: fits
    for run in runs.values():
        if run.seconds is None:
            assert "no scheduling budget" in run.note
            continue
        assert run.budget_bytes in f.ladder(device)
        assert run.peak_bytes <= device - facts.scratch.bytes            # the replay fitted the device


def test_figures_runs_every_configuration_at_every_batch(tiny):
    cols = f.figures("densenet-121", (8,), GIB, 32, say=lambda _: None, chunk_bytes=2 << 20,
                     blocks=(2, 2), growth=4, classes=10)
    assert list(cols) == ["baseline", "schedule", "schedule + VA", "blind schedule", "blind schedule + VA"]
    assert all(c.largest() == 8 for c in cols.values())                  # 1 GiB holds it: everything runs
    base = cols["baseline"].runs[8]
    assert all(abs(c.runs[8].seconds - base.seconds) < 1e-9 * base.seconds for c in cols.values())
    assert [r[0] for r in f.memory_rows(cols, (8,))][-2:] == ["blind schedule (scheduling budget)",
                                                            "blind schedule + VA (scheduling budget)"]
