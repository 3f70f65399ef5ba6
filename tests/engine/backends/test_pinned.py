"""Pinned host memory carved from chunks (engine/backends/pinned.py), on a stand-in resource
whose "pinned" buffers are numpy arrays: alignment, chunking, the pinned-range test, lifetime."""
import gc
import weakref

import numpy as np

from engine.backends.pinned import HOST_ALIGNMENT, PINNED_CHUNK, PinnedHostMemory


class Buffer:
    def __init__(self, size):
        self.data = np.zeros(size + HOST_ALIGNMENT, np.uint8)
        self.handle = self.data.ctypes.data + (-self.data.ctypes.data) % HOST_ALIGNMENT


class Resource:
    def __init__(self):
        self.sizes = []

    def allocate(self, size):
        self.sizes.append(size)
        return Buffer(size)


def test_buffers_are_aligned_filled_and_carved_from_few_chunks():
    res = Resource()
    mem = PinnedHostMemory(res)
    arrays = [mem.array((10, 3), np.float32, 0xFF), mem.array((7,), np.int64, 0xFF),
              mem.array((1,), np.float64, 0xFF)]
    assert res.sizes == [PINNED_CHUNK]                     # one chunk serves all three
    for a in arrays:
        assert a.ctypes.data % HOST_ALIGNMENT == 0 and mem.contains(a.ctypes.data, a.nbytes)
        assert (a.reshape(-1).view(np.uint8) == 0xFF).all()
    starts = sorted(a.ctypes.data for a in arrays)
    assert starts[1] - starts[0] >= 120 and len(set(starts)) == 3      # no overlap
    big = mem.array((PINNED_CHUNK // 8 + 1,), np.float64, 0)
    assert res.sizes[-1] == -(-big.nbytes // HOST_ALIGNMENT) * HOST_ALIGNMENT      # a chunk of its own
    assert mem.contains(big.ctypes.data, big.nbytes)
    assert not mem.contains(np.zeros(4).ctypes.data, 32)
    assert mem.array((0, 3), np.float32, 0xFF).shape == (0, 3) and len(res.sizes) == 2


def test_arrays_keep_their_chunk_alive_after_forget():
    mem = PinnedHostMemory(Resource())
    a = mem.array((4,), np.float32, 0)
    chunk = weakref.ref(mem._chunks[0][2])
    mem.forget()
    gc.collect()
    assert chunk() is not None and not mem.contains(a.ctypes.data, a.nbytes)
    a[:] = 1.5                                              # still valid memory
    del a
    gc.collect()
    assert chunk() is None
