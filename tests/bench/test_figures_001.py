"""bench/figures_001.py: the blind setting (001's: the schedule does not know the allocator) and the
capped one (ours) on a tiny DenseNet, checked for what each cell promises."""
import pytest

import zoo
from bench import figures_001 as f
from engine.ir import Kind
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


def test_each_of_001_s_models_is_built_at_its_size_and_batches_reach_past_the_paper_s_va_batch():
    for model, setting in f.MODELS.items():
        base, ratio = f.PAPER_LARGEST[setting.paper]
        assert max(setting.batches) >= base * ratio * f.PAPER_VA_OVER_SCHEDULE[1] - 0.5, model
        g = zoo.build(model, batch=2, size=setting.size)     # DeepLab's image pooling: BN needs 2 values
        image = g.shape(g.leaves(Kind.INPUT)[0])
        assert image[2] == setting.size and str(image[3]) in setting.image, model


def test_the_other_two_models_swap_in_a_small_device():
    """Pix2PixHD and DeepLabv3+ through the same cells as DenseNet, in bench.papers' quick settings:
    past the baseline's batch only the window runs."""
    from bench.papers import QUICK45
    for model in ("pix2pixhd", "deeplabv3plus"):
        _, options, size, batches, device, chunk = QUICK45[model]
        cols = f.figures(model, batches, device, size, say=lambda _: None, chunk_bytes=chunk, **options)
        assert cols["baseline"].largest() == batches[0], model
        assert cols["schedule"].largest() == cols["schedule + VA"].largest() == batches[1], model
