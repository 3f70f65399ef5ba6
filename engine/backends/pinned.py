"""Pinned (page-locked) host memory for the CUDA backend's asynchronous copies.

Buffers are carved, 256-byte aligned, from chunks of cuMemAllocHost (``DriverChunks``), so
thousands of swap buffers cost a few driver calls. Each buffer is a numpy array whose base keeps
its chunk alive. ``contains``
tells whether a host range lies in pinned memory: the driver copies pageable memory
synchronously, which would silently serialize the swap streams.
"""
from __future__ import annotations

import bisect
import math

import numpy as np

from .cuda_driver import Owned, check

PINNED_CHUNK = 64 << 20          # taken from the driver in chunks this big (or one buffer's size)
HOST_ALIGNMENT = 256


class DriverChunks:
    """The resource PinnedHostMemory takes chunks from, through cuda.bindings.driver ``d``."""

    def __init__(self, d):
        self._d = d

    def allocate(self, nbytes: int) -> Owned:
        """``nbytes`` of pinned host memory (cuMemAllocHost), freed when the last array using it goes."""
        return Owned(int(check(self._d, self._d.cuMemAllocHost(nbytes))), self._d.cuMemFreeHost)


class _PinnedView:
    """The base of a numpy array in pinned memory: keeps its chunk alive."""

    def __init__(self, chunk, ptr: int, nbytes: int):
        self.chunk = chunk
        self.__array_interface__ = {"data": (ptr, False), "shape": (nbytes,), "typestr": "|u1", "version": 3}


class PinnedHostMemory:
    def __init__(self, resource):
        """``resource``: where chunks come from (``allocate(n)``, an object with the address as ``handle``)."""
        self._resource = resource
        self._chunks: list[tuple[int, int, object]] = []    # (start, end, buffer), sorted by start
        self._free = (0, 0)                                  # (next free address, end) in the newest chunk

    def array(self, shape, dtype, fill: int) -> np.ndarray:
        """A numpy array of ``shape`` and ``dtype`` in pinned memory, every byte ``fill``."""
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes == 0:
            return np.empty(shape, dtype)
        start, end = self._free
        size = -(-nbytes // HOST_ALIGNMENT) * HOST_ALIGNMENT
        if end - start < size:
            chunk_bytes = max(PINNED_CHUNK, size)
            buf = self._resource.allocate(chunk_bytes)
            start = int(buf.handle)
            end = start + chunk_bytes
            bisect.insort(self._chunks, (start, end, buf))
        chunk = self._chunks[bisect.bisect_right(self._chunks, (start, float("inf"))) - 1][2]
        self._free = (start + size, end)
        raw = np.asarray(_PinnedView(chunk, start, nbytes))
        raw.fill(fill)
        return raw.view(dtype).reshape(shape)

    def contains(self, ptr: int, nbytes: int) -> bool:
        i = bisect.bisect_right(self._chunks, (ptr, float("inf"))) - 1
        return i >= 0 and self._chunks[i][0] <= ptr and ptr + nbytes <= self._chunks[i][1]

    def forget(self) -> None:
        """Drop the chunks; arrays already handed out keep theirs alive through their base."""
        self._chunks, self._free = [], (0, 0)
