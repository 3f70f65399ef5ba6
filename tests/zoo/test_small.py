import numpy as np

from engine.graph_check import validate
from engine.training import Trainer
from zoo import small


def test_small_models_train_on_the_reference():
    for g in (small.residual_cnn(batch=4, image=8, channels=4), small.lstm(batch=4, steps=3)):
        validate(g)
        tr = Trainer(g, seed=0)
        before = tr.state
        losses = [tr.step() for _ in range(2)]
        assert np.isfinite(losses).all()
        assert all(not np.array_equal(before[t], a) for t, a in tr.state.items()
                   if g.tensors[t].name.endswith("/w"))
