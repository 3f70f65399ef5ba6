"""A virtual-addressing arena on the GPU (paper 001's ``va`` allocator), through cuda.bindings.driver.

A reserved virtual range (``cuMemAddressReserve``) into which the Program's page-table rows map
physical chunks (``cuMemCreate`` handles of the rows' common size, a multiple of the device's
allocation granularity; ``cuMemMap`` + ``cuMemSetAccess``). A static Program maps every row once
and unmaps only when the arena goes (its streams idle); the chunk handles stay cached for the next
virtual arena (ChunkCache) and are released when the backend closes.
"""
from __future__ import annotations

import numpy as np

from ..errors import EngineError
from .cuda_driver import check


class CudaVirtualMemoryError(EngineError, ValueError):
    """A page table this device cannot map (rows not multiples of its allocation granularity)."""


class ChunkCache:
    """Physical chunks by index (cuMemCreate on first use), all of one size."""

    def __init__(self, d, device):
        self._d, self.device = d, device
        self._handles: dict[int, object] = {}
        self._bytes = 0
        prop = d.CUmemAllocationProp()
        prop.type = d.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        prop.location.id = int(device)
        self.prop = prop
        self.granularity = int(check(d, d.cuMemGetAllocationGranularity(
            prop, d.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM)))

    def handle(self, index: int, chunk_bytes: int):
        if chunk_bytes != self._bytes:
            self.release()
            self._bytes = chunk_bytes
        h = self._handles.get(index)
        if h is None:
            h = self._handles[index] = check(self._d, self._d.cuMemCreate(chunk_bytes, self.prop, 0))
        return h

    def release(self) -> None:
        for h in self._handles.values():
            check(self._d, self._d.cuMemRelease(h))
        self._handles.clear()


class VirtualArena:
    def __init__(self, d, chunks: ChunkCache, mappings, virtual_bytes: int):
        rows = np.asarray(mappings, dtype=np.int64).reshape(-1, 3)
        gran = chunks.granularity
        if len(rows) and (rows % gran).any():
            raise CudaVirtualMemoryError(f"the page table's chunks are not multiples of this GPU's allocation "
                                         f"granularity ({gran // 2**20} MiB): choose --chunk-mib a multiple of it")
        chunk = int(np.gcd.reduce(rows[:, 1:].reshape(-1))) if len(rows) else gran
        self._d = d
        self.size = max(gran, -(-int(virtual_bytes) // gran) * gran)
        self.base = int(check(d, d.cuMemAddressReserve(self.size, gran, 0, 0)))
        self.mapped: list[tuple[int, int]] = []
        access = d.CUmemAccessDesc()
        access.location.type = d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        access.location.id = int(chunks.device)
        access.flags = d.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        self.rows = [(self.base + v, n) for v, _, n in rows.tolist()]      # (address, bytes) of each row
        for virt, phys, n in rows.tolist():
            for k in range(0, n, chunk):
                check(d, d.cuMemMap(self.base + virt + k, chunk, 0, chunks.handle((phys + k) // chunk, chunk), 0))
                self.mapped.append((self.base + virt + k, chunk))
            check(d, d.cuMemSetAccess(self.base + virt, n, [access], 1))

    def unmap(self) -> None:
        """Unmap every chunk and free the reservation (streams idle)."""
        for ptr, size in self.mapped:
            check(self._d, self._d.cuMemUnmap(ptr, size))
        self.mapped = []
        check(self._d, self._d.cuMemAddressFree(self.base, self.size))
