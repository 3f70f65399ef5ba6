import numpy as np

from engine.data import TeacherData
from zoo import small


def test_batches_depend_on_seed_and_iteration_only():
    g = small.lstm(batch=8, steps=3, features=4, hidden=6, layers=1, classes=4)
    a, b = TeacherData(g, seed=0), TeacherData(g, seed=0)
    for t, v in a.batch(3).items():
        assert np.array_equal(v, b.batch(3)[t])
    x = g.leaves()[0]
    assert not np.array_equal(a.batch(3)[x], a.batch(4)[x])


def test_labels_come_from_the_teacher_and_use_several_classes():
    g = small.residual_cnn(batch=64, image=8, channels=4, classes=5)
    d = TeacherData(g, seed=0)
    (label,) = d.labels
    y = d.batch(0)[label]
    assert y.dtype == np.int32 and y.shape == (64,)
    assert 0 <= y.min() and y.max() < 5 and len(np.unique(y)) >= 3
