"""The operators' CUDA C, compiled by NVRTC to cubin, cached on disk; works without a GPU.

Each op family's ``ops/<family>.cu`` is one NVRTC program. ``#include "x.cuh"`` lines
naming a header in ``ops/`` are replaced by the header's text (once per program), so
NVRTC needs no include path and the cache key covers every byte compiled. Compiling
for an explicit architecture (``sm_90``) needs neither a driver nor a device.

The cache is a directory of ``<sha256>.cubin`` files (``$SWAPENGINE_KERNEL_CACHE``, else
``~/.cache/swapengine/kernels``), keyed by the source, the options, the architecture and
the NVRTC version; files are written to a temporary name and renamed, so concurrent
processes never read half a file.

A cubin is an ELF file. ``kernel_signatures`` reads, from its symbol and ``.nv.info``
sections, each kernel's name and parameter sizes, so tests can check without a GPU
that every launch descriptor passes arguments of the sizes the kernel expects.
"""
from __future__ import annotations

import hashlib
import multiprocessing
import os
import re
import struct
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import ops

OPS_DIR = Path(ops.__file__).resolve().parent
FAMILIES = ("elementwise", "dense", "norm", "loss", "shape", "optim", "conv", "pooling", "attention", "layer_norm",
            "embedding", "activation", "broadcast", "math", "indexing", "logic", "resample")
STD = "c++17"
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)


class KernelCompileError(RuntimeError):
    """NVRTC rejected a program; the message holds NVRTC's log."""


def cache_dir() -> Path:
    root = os.environ.get("SWAPENGINE_KERNEL_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "swapengine" / "kernels"


def family_source(family: str) -> str:
    """The text NVRTC compiles for ``family``: its .cu file with ops/ headers pasted in."""
    path = OPS_DIR / f"{family}.cu"
    if not path.is_file():
        raise FileNotFoundError(f"no CUDA source {path} for op family '{family}'")
    return _expand(path.read_text(), set())


def _expand(text: str, seen: set[str]) -> str:
    def paste(m: re.Match) -> str:
        name = m.group(1)
        header = OPS_DIR / name
        if not header.is_file():
            return m.group(0)          # left for NVRTC to report
        if name in seen:
            return f"// {name} already included"
        seen.add(name)
        return f"// ---- {name}\n{_expand(header.read_text(), seen)}\n// ---- end of {name}"
    return _INCLUDE.sub(paste, text)


def _nvrtc_version() -> str:
    from cuda.bindings import nvrtc
    err, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def _options(arch: str):
    from cuda.core import ProgramOptions
    return ProgramOptions(name="swapengine", arch=arch, std=STD)


def cache_key(source: str, arch: str) -> str:
    h = hashlib.sha256()
    for part in (source, arch, STD, _nvrtc_version(), "cubin"):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def compile_source(source: str, arch: str = "sm_90", what: str = "program", cache: bool = True) -> bytes:
    """cubin for ``source``; KernelCompileError (with NVRTC's log) if it does not compile."""
    path = cache_dir() / f"{cache_key(source, arch)}.cubin" if cache else None
    if path is not None and path.is_file():
        return path.read_bytes()
    from cuda.core import Program
    try:
        code = Program(source, code_type="c++", options=_options(arch)).compile("cubin")
    except Exception as e:          # cuda.core raises NVRTCError; its message holds the log
        raise KernelCompileError(f"NVRTC could not compile {what} for {arch}:\n{e}") from None
    cubin = bytes(code.code)
    if path is not None:
        _write_atomically(path, cubin)
    return cubin


def _write_atomically(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass                        # a cache that cannot be written only costs time


SANITIZER_SOURCE = Path(__file__).resolve().parent / "sanitizer.cu"


def compile_sanitizer(arch: str = "sm_90", cache: bool = True) -> bytes:
    """cubin of the CUDA sanitizer's delay kernel (``sanitizer_delay``)."""
    return compile_source(SANITIZER_SOURCE.read_text(), arch, "engine/backends/sanitizer.cu", cache)


def compile_family(family: str, arch: str = "sm_90", cache: bool = True) -> bytes:
    return compile_source(family_source(family), arch, f"ops/{family}.cu", cache)


def compile_all(arch: str = "sm_90", families=FAMILIES, cache: bool = True) -> dict[str, bytes]:
    """Kernel name -> the cubin (bytes) of the family that defines it, for every family.

    Families missing from the cache compile in parallel worker processes (NVRTC, called
    through cuda.core, holds the GIL), or in this process when one CPU or one family."""
    families = tuple(families)
    sources = {f: family_source(f) for f in families}
    cubins: dict[str, bytes] = {}
    missing = []
    for f in families:
        path = cache_dir() / f"{cache_key(sources[f], arch)}.cubin"
        if cache and path.is_file():
            cubins[f] = path.read_bytes()
        else:
            missing.append(f)
    workers = min(len(missing), os.cpu_count() or 1)
    if workers > 1:
        ctx = multiprocessing.get_context("spawn")     # no CUDA state inherited
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            jobs = [pool.submit(compile_source, sources[f], arch, f"ops/{f}.cu", cache) for f in missing]
            cubins.update(zip(missing, (j.result() for j in jobs)))
    else:
        cubins.update((f, compile_source(sources[f], arch, f"ops/{f}.cu", cache)) for f in missing)
    out: dict[str, bytes] = {}
    for family in families:
        for name in kernel_signatures(cubins[family]):
            if name in out:
                raise KernelCompileError(f"kernel '{name}' is defined by ops/{family}.cu and another family")
            out[name] = cubins[family]
    return out


# ---------------------------------------------------------------------- reading a cubin

@dataclass(frozen=True)
class KernelSignature:
    name: str
    param_sizes: tuple[int, ...]     # bytes of each parameter, in order
    static_shared_bytes: int


_SHT_NOBITS = 8
_EIATTR_KPARAM_INFO = 0x17
_EIFMT_SVAL = 4


def _sections(elf: bytes) -> dict[str, tuple[int, bytes, int]]:
    """Section name -> (type, contents, size) of a 64-bit little-endian ELF file."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file (a cubin)")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names_at = heads[shstrndx][4]
    out = {}
    for name, typ, _flags, _addr, off, size, *_ in heads:
        end = elf.index(b"\0", names_at + name)
        data = b"" if typ == _SHT_NOBITS else elf[off:off + size]
        out[elf[names_at + name:end].decode()] = (typ, data, size)
    return out


def _param_sizes(info: bytes) -> tuple[int, ...]:
    """Parameter sizes from a kernel's .nv.info records (EIATTR_KPARAM_INFO: ordinal, size)."""
    params, i = {}, 0
    while i + 4 <= len(info):
        fmt, attr, value = info[i], info[i + 1], struct.unpack_from("<H", info, i + 2)[0]
        i += 4
        if fmt != _EIFMT_SVAL:
            continue
        payload, i = info[i:i + value], i + value
        if attr == _EIATTR_KPARAM_INFO:
            _index, ordinal, _offset, flags = struct.unpack_from("<IHHI", payload)
            params[ordinal] = (flags >> 18) & 0x3FFF
    return tuple(params[k] for k in sorted(params))


def kernel_signatures(cubin: bytes) -> dict[str, KernelSignature]:
    secs = _sections(cubin)
    out = {}
    for sec in secs:
        if sec.startswith(".text."):
            name = sec[len(".text."):]
            info = secs.get(f".nv.info.{name}", (0, b"", 0))[1]
            shared = secs.get(f".nv.shared.{name}", (0, b"", 0))[2]
            out[name] = KernelSignature(name, _param_sizes(info), shared)
    return out
