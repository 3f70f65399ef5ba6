"""Real virtual memory on the host, for the CPU backend's virtual-addressing arenas (paper 001).

Physical memory is an anonymous memory file (``os.memfd_create``); a contiguous virtual range is
reserved with ``mmap(PROT_NONE)``, and each page-table row maps its slice of the file into that
range with ``mmap(MAP_FIXED | MAP_SHARED)`` (through libc: Python's ``mmap`` module cannot place a
mapping). So numpy sees every object as one contiguous array while its pages live in chunks of
the file that need not be adjacent, and an object that reuses a chunk sees the bytes the chunk's
earlier tenant left there. ``physical`` is the whole file mapped once more, contiguously: the
physical memory as the allocator numbered it (for poisoning and for tests).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os

import numpy as np

from ..errors import EngineError

PAGE = mmap.PAGESIZE
PROT_NONE, PROT_RW = 0, mmap.PROT_READ | mmap.PROT_WRITE
MAP_SHARED, MAP_PRIVATE = mmap.MAP_SHARED, mmap.MAP_PRIVATE
MAP_ANONYMOUS = getattr(mmap, "MAP_ANONYMOUS", 0x20)
MAP_FIXED = 0x10                       # Linux, every architecture
MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)
MAP_FAILED = ctypes.c_void_p(-1).value


class VirtualMemoryError(EngineError, OSError):
    """The operating system refused a mapping, or a page table a host cannot map."""


def _libc():
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                          ctypes.c_long]
    libc.munmap.restype = ctypes.c_int
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def _round_page(n: int) -> int:
    return max(PAGE, -(-n // PAGE) * PAGE)


class MappedArena:
    """``virtual``: a uint8 array over the reserved range (only mapped rows may be touched);
    ``physical``: a uint8 array over the memory file. ``close`` unmaps both."""

    def __init__(self, physical_bytes: int, mappings: np.ndarray, virtual_bytes: int):
        if not hasattr(os, "memfd_create"):
            raise VirtualMemoryError("virtual addressing on the cpu backend needs Linux (os.memfd_create)")
        rows = np.asarray(mappings, dtype=np.int64).reshape(-1, 3)
        bad = rows[(rows % PAGE).any(axis=1)] if len(rows) else rows
        if len(bad):
            v, p, n = (int(x) for x in bad[0])
            raise VirtualMemoryError(f"the page table row (virtual {v}, physical {p}, {n} bytes) is not aligned "
                                     f"to the host's {PAGE}-byte pages: choose a chunk size that is a multiple of it")
        self._libc = _libc()
        self._maps: list[tuple[int, int]] = []
        self._fd = os.memfd_create("swapengine-arena", getattr(os, "MFD_CLOEXEC", 1))
        try:
            self.physical_bytes = _round_page(physical_bytes)
            os.ftruncate(self._fd, self.physical_bytes)
            phys = self._mmap(None, self.physical_bytes, PROT_RW, MAP_SHARED, self._fd, 0)
            self.virtual_bytes = _round_page(virtual_bytes)
            base = self._mmap(None, self.virtual_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
            for v, p, n in rows.tolist():
                self._mmap(base + v, n, PROT_RW, MAP_SHARED | MAP_FIXED, self._fd, p, record=False)
        except BaseException:
            self.close()
            raise
        self.base = base
        self.physical = np.ctypeslib.as_array((ctypes.c_uint8 * self.physical_bytes).from_address(phys))
        self.virtual = np.ctypeslib.as_array((ctypes.c_uint8 * self.virtual_bytes).from_address(base))

    def _mmap(self, addr, length, prot, flags, fd, offset, record=True) -> int:
        got = self._libc.mmap(addr, length, prot, flags, fd, offset)
        if got in (None, MAP_FAILED):
            err = ctypes.get_errno()
            raise VirtualMemoryError(f"mmap of {length} bytes failed: {os.strerror(err)}"
                                     + (" (too many mappings? see vm.max_map_count; a larger chunk makes fewer)"
                                        if err == 12 else ""))
        if addr is not None and got != addr:
            raise VirtualMemoryError("mmap did not place a chunk where it was asked to")
        if record:       # rows inside the reserved range go with it
            self._maps.append((got, length))
        return got

    def close(self) -> None:
        """Unmap everything; arrays made from this arena must not be used afterwards."""
        self.physical = self.virtual = None
        while self._maps:
            addr, length = self._maps.pop()
            self._libc.munmap(addr, length)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
