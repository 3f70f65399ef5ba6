"""Run the ops' CUDA C kernels on the host, for checking their logic without a GPU.

Each op family's source (headers pasted, as NVRTC sees it) is compiled by g++ together with
cuda_emu.h, which defines the little CUDA the kernels use; a trampoline per kernel takes
its arguments as an array of pointers, as cuLaunchKernel does. Launch descriptors run
as they would on a GPU, except that grid-stride axes (coverage 0 items per block) are
clamped to two blocks, which the loops must then cover. Each block is 256 host threads
meeting at barriers, so a launch costs about a millisecond per block.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np

from engine.backends import nvrtc

HERE = Path(__file__).resolve().parent
_KERNEL = re.compile(r'extern\s+"C"\s+void\s+(\w+)\s*\(([^)]*)\)\s*\{', re.S)


def available() -> bool:
    return shutil.which("g++") is not None


def _param_type(param: str) -> str:
    """'const float* x' -> 'const float*'; 'int n' -> 'int'."""
    param = " ".join(param.split())
    return re.sub(r"\s*\b\w+$", "", param)


@lru_cache(maxsize=None)
def library(family: str):
    """(ctypes library, kernel names) for one op family, built once per source text."""
    source = '#include "cuda_emu.h"\n' + nvrtc.family_source(family)
    key = hashlib.sha256((source + (HERE / "cuda_emu.h").read_text()).encode()).hexdigest()[:16]
    build = Path(tempfile.gettempdir()) / "swapengine-cuda-emu"
    build.mkdir(exist_ok=True)
    lib = build / f"{family}-{key}.so"
    flags = ["-std=c++20", "-O1", "-ffp-contract=off", "-fno-fast-math", "-pthread", "-I", str(HERE),
             "-Wno-unknown-pragmas"]
    names = []
    cpp = build / f"{family}-{key}-{os.getpid()}.cpp"     # per process: concurrent runs never share one
    cpp.write_text(source)
    expanded = subprocess.run(["g++", *flags, "-E", "-x", "c++", str(cpp)], check=True, capture_output=True,
                              text=True).stdout
    tramps = []
    for name, params in _KERNEL.findall(expanded):
        if name == "emu_launch":
            continue
        types = [_param_type(p) for p in params.split(",")] if params.strip() else []
        call = ", ".join(f"*({t}*)a[{i}]" for i, t in enumerate(types))
        tramps.append(f'extern "C" void emu_t_{name}(void** a) {{ {name}({call}); }}')
        names.append(name)
    if not lib.is_file():
        cpp.write_text(source + "\n" + "\n".join(tramps) + "\n")
        tmp = lib.with_suffix(f".{os.getpid()}.so")
        subprocess.run(["g++", *flags, "-fPIC", "-shared", "-x", "c++", str(cpp), "-o", str(tmp)], check=True,
                       capture_output=True, text=True)
        tmp.replace(lib)
    cpp.unlink()
    return ctypes.CDLL(str(lib)), tuple(names)


@lru_cache(maxsize=None)
def _family_of() -> dict[str, str]:
    out = {}
    for family in nvrtc.FAMILIES:
        for name in library(family)[1]:
            out[name] = family
    return out


def launch(kernel: str, grid, block, args) -> None:
    """Run one kernel as cuLaunchKernel would: ``args`` are pointers (ints) and numpy scalars."""
    lib, _ = library(_family_of()[kernel])
    keep = [np.array(a, dtype=np.uint64) if isinstance(a, int) else np.array(a) for a in args]
    argv = (ctypes.c_void_p * max(len(keep), 1))(*[k.ctypes.data for k in keep])
    tramp = ctypes.cast(getattr(lib, f"emu_t_{kernel}"), ctypes.c_void_p)
    lib.emu_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_uint] * 4
    if lib.emu_launch(tramp, argv, *grid, block[0]):
        raise ValueError(f"{kernel}: the emulator runs 256-thread blocks only, got {block}")


def run(launches, inputs, outputs, workspaces) -> None:
    """Run launch descriptors on numpy arrays (inputs, outputs, scratch regions), in order."""
    refs = {"in": inputs, "out": outputs, "workspace": workspaces}
    for l in launches:
        args = [refs[a[0]][a[1]].ctypes.data if isinstance(a, tuple) else a for a in l.args]
        grid = [min(g, 2) if per == 0 else g for g, per in zip(l.grid, (*l.covers.per_block, 1, 1, 1)[:3])]
        launch(l.kernel, grid, l.block, args)
