import numpy as np

from engine.arrays import ALIGNMENT, aligned_empty


def test_aligned_empty_starts_on_the_boundary():
    a = aligned_empty((7, 3), np.float32)
    assert a.ctypes.data % ALIGNMENT == 0 and a.shape == (7, 3) and a.dtype == np.float32
    b = aligned_empty((5,), np.uint8, alignment=256)
    assert b.ctypes.data % 256 == 0 and b.nbytes == 5
