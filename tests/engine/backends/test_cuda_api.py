"""Our use of cuda.bindings.driver (and of cuda.core's NVRTC), checked against the INSTALLED library
without a GPU.

The CUDA backend (engine/backends/cuda.py, cuda_kernels.py, cuda_vmm.py, cuda_graph.py, pinned.py)
runs on the driver bindings alone; the other tests run it on fake_driver.py, which only says how we
think the driver behaves. Here the installed bindings answer: every name we spell exists, every
call passes as many arguments as the installed function takes (and the fake takes the same), and
the arguments we pass, kernel parameters included, are ones the bindings convert: a binding
converts its arguments before it loads libcuda, so where there is none, a call with acceptable
arguments ends in DynamicLibNotFoundError and a bad one in TypeError first (in a subprocess, so
that failure cannot touch this one). Whether the driver then does what we want, only the ``gpu``
tests say.
"""
from __future__ import annotations

import ast
import inspect
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

real_driver = pytest.importorskip("cuda.bindings.driver")
core = pytest.importorskip("cuda.core")

from engine.backends import nvrtc  # noqa: E402

from . import fake_driver  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
BACKEND = ["engine/backends/cuda.py", "engine/backends/cuda_driver.py", "engine/backends/cuda_vmm.py",
           "engine/backends/cuda_graph.py", "engine/backends/pinned.py"]
DRIVER = r"(?:\bd|self\._d|backend\._d)"       # how the backend's modules name the driver module


def _names(path: str) -> set[str]:
    return set(re.findall(DRIVER + r"\.([A-Za-z_][\w.]*[\w])", (ROOT / path).read_text()))


def _calls(path: str) -> list[tuple[str, int]]:
    """(driver function, positional arguments) of each call; a starred grid or block counts 3."""
    out = []
    for n in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.startswith("cu"):
            owner = ast.unparse(n.func.value)
            if owner in ("d", "self._d", "backend._d"):
                out.append((n.func.attr, sum(3 if isinstance(a, ast.Starred) else 1 for a in n.args)))
    return out


def _installed_arity(name: str) -> int:
    """Parameters of an installed binding, from its docstring's signature line."""
    first = getattr(real_driver, name).__doc__.split("\n")[0]
    inside = first[first.index("(") + 1:first.rindex(")")].strip()
    return len(inside.split(",")) if inside else 0


def test_the_backend_and_nvrtc_were_written_for_these_versions():
    import cuda.bindings
    assert int(cuda.bindings.__version__.split(".")[0]) >= 13, cuda.bindings.__version__
    assert int(core.__version__.split(".")[0]) == 1, core.__version__       # nvrtc.py: cuda.core.Program


@pytest.mark.parametrize("path", BACKEND)
def test_every_driver_name_our_code_spells_exists_in_the_installed_bindings(path):
    """Catches typos on paths no CPU test runs (e.g. the >48 KiB shared-memory opt-in)."""
    missing = []
    for dotted in _names(path):
        obj = real_driver
        for part in dotted.split("."):
            if part == "value" and hasattr(obj, "value"):
                break
            if not hasattr(obj, part):
                missing.append(dotted)
                break
            obj = getattr(obj, part)
    assert not missing, f"{path} uses names the installed cuda.bindings.driver lacks: {sorted(missing)}"


def test_every_call_passes_what_the_installed_function_and_the_fake_take():
    calls = {c for path in BACKEND for c in _calls(path)}
    assert len({name for name, _ in calls}) >= 30, "the backend's calls were not found: update DRIVER"
    fake = fake_driver.FakeDriver()
    wrong = [f"{name}: {n} given, {_installed_arity(name)} taken" for name, n in calls if n != _installed_arity(name)]
    assert not wrong, wrong
    drift = [name for name, n in calls if len(inspect.signature(getattr(fake, name)).parameters) != n]
    assert not drift, f"fake_driver.py's signatures differ from the installed bindings: {drift}"


BINDINGS_SCRIPT = textwrap.dedent(r'''
    import ctypes, json, sys
    try:
        ctypes.CDLL("libcuda.so.1")
        print(json.dumps({"skip": "libcuda is loadable here"}))
        sys.exit(0)
    except OSError:
        pass
    import numpy as np
    from cuda.bindings import driver as d
    launches = json.loads(sys.argv[1])
    CT = {t.__name__: t for t in (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_longlong,
                                  ctypes.c_ulonglong, ctypes.c_float, ctypes.c_double)}
    h = np.zeros(64, np.uint8).ctypes.data            # host pointers: numpy's .ctypes.data, a Python int
    dev, stream, ev, fn = 0x7F0000001000, d.CUstream(0x5555), d.CUevent(0x6666), d.CUfunction(0x7777)
    attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    calls = {
        "cuMemAlloc(int)": lambda: d.cuMemAlloc(64),
        "cuMemsetD8Async(int, 0xFF, int, CUstream)": lambda: d.cuMemsetD8Async(dev, 0xFF, 64, stream),
        "cuMemcpyDtoH(int, int, int)": lambda: d.cuMemcpyDtoH(h, dev, 64),
        "cuMemcpyHtoDAsync(int, int, int, CUstream)": lambda: d.cuMemcpyHtoDAsync(dev, h, 64, stream),
        "cuMemcpyDtoHAsync(int, int, int, CUstream)": lambda: d.cuMemcpyDtoHAsync(h, dev, 64, stream),
        "cuEventRecord(CUevent, CUstream)": lambda: d.cuEventRecord(ev, stream),
        "cuStreamWaitEvent(CUstream, CUevent, 0)": lambda: d.cuStreamWaitEvent(stream, ev, 0),
        "cuFuncSetAttribute(CUfunction, attr, int)": lambda: d.cuFuncSetAttribute(fn, attr, 65536),
        "cuModuleGetFunction(CUmodule, bytes)": lambda: d.cuModuleGetFunction(d.CUmodule(0x8888), b"relu_fwd"),
        "cuStreamBeginCapture(CUstream, mode)": lambda: d.cuStreamBeginCapture(
            stream, d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED),
        "cuStreamCreate(int)": lambda: d.cuStreamCreate(d.CUstream_flags.CU_STREAM_NON_BLOCKING.value),
        "cuEventCreate(int)": lambda: d.cuEventCreate(d.CUevent_flags.CU_EVENT_DISABLE_TIMING.value),
        "cuMemAllocHost(int)": lambda: d.cuMemAllocHost(64),
    }
    for i, (values, types) in enumerate(launches):
        params = (tuple(values), tuple(CT[t] for t in types))
        calls[f"cuLaunchKernel #{i} {types}"] = lambda p=params: d.cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, stream, p, 0)
    controls = {
        "stream given as a str": lambda: d.cuMemsetD8Async(dev, 0xFF, 64, "s"),
        "memset value 256": lambda: d.cuMemsetD8Async(dev, 256, 64, stream),
        "a kernel parameter of a type the bindings cannot marshal": lambda: d.cuLaunchKernel(
            fn, 1, 1, 1, 1, 1, 1, 0, stream, ((1,), (str,)), 0),
        "a pointer parameter given as a str": lambda: d.cuLaunchKernel(
            fn, 1, 1, 1, 1, 1, 1, 0, stream, (("p",), (ctypes.c_void_p,)), 0),
    }
    out = {}
    for group, table in (("calls", calls), ("controls", controls)):
        out[group] = {}
        for k, f in table.items():
            try:
                out[group][k] = ["returned", repr(f())[:200]]
            except Exception as e:
                out[group][k] = [type(e).__name__, str(e)[:200]]
    print(json.dumps(out))
''')


def _bound_launches(monkeypatch) -> list:
    """The kernel parameters the backend binds for a few operators (every scalar type they use)."""
    from types import SimpleNamespace

    import numpy as np

    from engine.backends.cuda import CudaBackend
    from engine.program import COMPUTE
    from tests.ops.cuda_cases import case
    fake_driver.install(monkeypatch)
    be = CudaBackend()
    try:
        out = []
        for c in (case("conv2d_grad_weight", [(16, 32, 16, 16), (16, 32, 16, 16)], padding=1, kernel_hw=(3, 3)),
                  case("fully_connected", [(2, 4096), (16, 4096), (16,)]), case("fill", [], shape=(4,), value=1.0),
                  case("scale", [(8,)], factor=0.5)):
            be.allocate_arena(1 << 24, 1 << 22)
            views = [be.view(i << 22, t.shape, t.dtype) for i, t in enumerate((*c.ins, *c.outs))]
            node = SimpleNamespace(op=c.op, attrs=c.attrs, id=0)
            out += [params for *_, params in be.kernels.bind(COMPUTE, node, views[:len(c.ins)], views[len(c.ins):],
                                                             be._scratch, be._scratch_bytes)]
        assert {t for _, types in out for t in types} >= {np.ctypeslib.ctypes.c_void_p, np.ctypeslib.ctypes.c_int}
        return [(list(v), [t.__name__ for t in types]) for v, types in out]
    finally:
        be.close()


def test_the_installed_bindings_accept_the_arguments_and_kernel_parameters_we_pass(monkeypatch):
    """Skipped where libcuda exists (the gpu-marked tests make these calls for real there)."""
    launches = _bound_launches(monkeypatch)
    out = subprocess.run([sys.executable, "-c", BINDINGS_SCRIPT, json.dumps(launches)], capture_output=True,
                         text=True, timeout=120, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if "skip" in res:
        pytest.skip(res["skip"])
    refused = {k: v for k, v in res["calls"].items() if v[0] not in ("DynamicLibNotFoundError", "returned")}
    assert not refused, f"the installed bindings refuse arguments of the types the backend passes: {refused}"
    accepted = {k: v for k, v in res["controls"].items() if v[0] not in ("TypeError", "OverflowError", "ValueError")}
    assert not accepted, f"these should have been refused before loading the driver: {accepted}"


def test_detect_catches_what_a_missing_driver_raises():
    """detect_gpu catches RuntimeError around cuInit: a missing libcuda raises cuda.pathfinder's
    DynamicLibNotFoundError, which is one."""
    from cuda.pathfinder import DynamicLibNotFoundError
    assert issubclass(DynamicLibNotFoundError, RuntimeError)
    src = (ROOT / "engine/backends/detect.py").read_text()
    assert "(err,) = driver.cuInit(0)" in src and "except RuntimeError" in src


def test_nvrtc_program_and_options_as_our_compiler_uses_them():
    try:
        nvrtc._nvrtc_version()
    except (ImportError, RuntimeError, OSError) as e:
        pytest.skip(f"NVRTC cannot be loaded: {e}")
    from cuda.bindings import nvrtc as real_nvrtc
    v = real_nvrtc.nvrtcVersion()
    assert len(v) == 3 and v[0] == real_nvrtc.nvrtcResult.NVRTC_SUCCESS            # err, major, minor
    assert {"name", "arch", "std"} <= set(inspect.signature(core.ProgramOptions).parameters)
    src = 'extern "C" __global__ void k(float* y, int n, float a) { if (threadIdx.x < n) y[threadIdx.x] *= a; }'
    obj = core.Program(src, code_type="c++", options=nvrtc._options("sm_90")).compile("cubin")
    assert isinstance(obj.code, bytes) and obj.code[:4] == b"\x7fELF"
    assert nvrtc.compile_source(src, "sm_90", cache=False) == bytes(obj.code)
    assert nvrtc.kernel_signatures(obj.code)["k"].param_sizes == (8, 4, 4)
