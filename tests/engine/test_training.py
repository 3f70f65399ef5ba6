import numpy as np
import pytest

from engine.schedules import random_order
from engine.training import CheckpointError, ReferenceRunner, Trainer
from zoo import small


def train_state(g, order, iterations=5, seed=0):
    tr = Trainer(g, seed=seed, runner=ReferenceRunner(g, order))
    losses = [tr.step() for _ in range(iterations)]
    return tr.state, losses


@pytest.mark.parametrize("build", [
    lambda: small.residual_cnn(batch=4, image=8, channels=4, classes=5),
    lambda: small.lstm(batch=4, steps=4, features=6, hidden=8, layers=2, classes=4),
], ids=["residual_cnn", "lstm2"])
def test_parameters_are_bit_identical_under_three_random_orders(build):
    g = build()
    base, _ = train_state(g, g.default_order())
    for seed in range(3):
        order = random_order(g, np.random.default_rng(seed))
        assert order != g.default_order()
        state, _ = train_state(g, order)
        for t, a in base.items():
            assert np.array_equal(a, state[t]), f"{g.tensors[t].name} differs under order {seed}"
    # the check can fail: a different seed gives different parameters
    other, _ = train_state(g, g.default_order(), seed=1)
    assert any(not np.array_equal(a, other[t]) for t, a in base.items())


def test_cnn_loss_halves_within_a_few_hundred_iterations():
    g = small.residual_cnn()
    tr = Trainer(g, seed=0)
    losses = [tr.step() for _ in range(300)]
    first, last = np.mean(losses[:10]), np.mean(losses[-20:])
    assert last <= first / 2, f"loss {first:.3f} -> {last:.3f}"


def test_checkpoint_resume_is_bit_identical(tmp_path):
    g = small.lstm(batch=4, steps=3, features=4, hidden=6, layers=1, classes=3)
    straight = Trainer(g, seed=5)
    for _ in range(6):
        straight.step()
    first = Trainer(g, seed=5)
    for _ in range(3):
        first.step()
    path = str(tmp_path / "ck.npz")
    first.save(path)
    resumed = Trainer(g, seed=5)
    resumed.load(path)
    assert resumed.iteration == 3
    for _ in range(3):
        resumed.step()
    for t, a in straight.state.items():
        assert np.array_equal(a, resumed.state[t])


def test_checkpoint_errors_are_one_line(tmp_path):
    g = small.lstm(batch=2, steps=2, features=4, hidden=4, layers=1, classes=3)
    other = small.lstm(batch=2, steps=2, features=4, hidden=5, layers=1, classes=3)
    tr = Trainer(g)
    path = str(tmp_path / "ck.npz")
    tr.save(path)
    with pytest.raises(CheckpointError, match="was saved for model"):
        Trainer(other).load(path)
    with pytest.raises(CheckpointError, match="does not exist"):
        tr.load(str(tmp_path / "missing.npz"))
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(CheckpointError, match="cannot be read"):
        tr.load(str(bad))
