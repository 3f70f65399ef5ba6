"""Our use of cuda.core and cuda.bindings, checked against the INSTALLED library without a GPU.

engine/backends/cuda.py, detect.py and nvrtc.py (and engine/cuda_profiling.py through them)
were written against cuda.core 1.2 / cuda.bindings 13 and have not run on a GPU; the fake CUDA
the other backend tests use (fake_cuda.py) only says how we think the API behaves. Here the
installed library answers, three ways, none of which loads libcuda or touches a device:

1. Library facts our code relies on, from the installed signatures, docstrings and stubs
   (cuda/core/cu13/*.pyi, _cpp/resource_handles.hpp), and from the pieces that run with no
   driver: LaunchConfig, EventOptions, ProgramOptions/Program (NVRTC), ``ParamHolder`` (the
   kernel-argument marshaller ``cuda.core.launch`` uses), GraphBuilder's build-mode check, the
   driver bindings' handle types.
2. The backend run on the fake CUDA behind a contract layer (``Ledger``): every call it makes
   into cuda.core / cuda.bindings must bind to the installed signature, pass values the real
   bindings convert, gets back values of the real types (CUresult, CUdeviceptr, CUstream,
   CUkernel), and must keep the rules the library or driver enforces (capture joins, timing
   events complete before subtraction, pinned memory in captured copies, dynamic shared memory
   opted into, ...). The real LaunchConfig and the real ParamHolder build every launch.
3. The driver bindings called in a subprocess, only where libcuda cannot be loaded, with the
   argument types our code passes: they must get as far as loading the driver library.

Never called here: Device(), cuInit, allocation, get_kernel, or anything else that reaches a
driver (without libcuda the first such call raises, and cuda.core has been seen to hang after).
"""
from __future__ import annotations

import ctypes
import inspect
import json
import operator
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

core = pytest.importorskip("cuda.core")

# The audit reads private modules and stub files of the release it was written against; under
# another release it skips (saying so) instead of failing for reasons that say nothing about
# our code. Re-audit when setup.cfg's cuda-python range brings a new cuda.core.
AUDITED_CORE = "1.2"
if ".".join(core.__version__.split(".")[:2]) != AUDITED_CORE:
    pytest.skip(f"audited against cuda.core {AUDITED_CORE}.x, installed {core.__version__}",
                allow_module_level=True)
try:
    from cuda.core._kernel_arg_handler import ParamHolder  # what launch() marshals with
    from cuda.core._module import KernelAttributes
    from cuda.core.graph import Graph as RealGraph
    from cuda.core.graph import GraphBuilder as RealGraphBuilder
    from cuda.core.graph import GraphCompleteOptions
except ImportError as e:
    pytest.skip(f"cuda.core {core.__version__} lacks a module the audit reads ({e})", allow_module_level=True)

from cuda.bindings import driver as real_driver
from cuda.bindings import nvrtc as real_nvrtc

from engine.backends import cuda as cuda_backend
from engine.backends import nvrtc
from engine.backends.cuda import CudaBackend
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT
from ops.cuda_launch import IN, OUT, Coverage, Launch
from tests.ops.cuda_cases import all_cases

from . import fake_cuda

ROOT = Path(__file__).resolve().parents[3]
CORE_DIR = Path(sys.modules[core.Stream.__module__].__file__).parent      # cuda/core/cu13
STATIC_SHARED_LIMIT = 48 * 1024          # above this a kernel must opt in to dynamic shared memory


def _sig(fn) -> inspect.Signature:
    return inspect.signature(fn)


def _params(fn) -> list[str]:
    return list(_sig(fn).parameters)


def _is_data_descriptor(cls, name) -> bool:
    attr = inspect.getattr_static(cls, name)
    return isinstance(attr, (property, types.GetSetDescriptorType, types.MemberDescriptorType))


def _driver_doc(fn) -> tuple[dict[str, str], list[tuple[str, str | None]]]:
    """(parameter -> documented type, [(return name, type)]) from a cuda.bindings docstring."""
    lines = (fn.__doc__ or "").splitlines()
    params, returns, section = {}, [], None
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and lines[i + 1] and set(lines[i + 1]) == {"-"} and not line.startswith(" "):
            section = line.strip()
            continue
        if not line or line.startswith(" ") or set(line) == {"-"}:
            continue
        if section == "Parameters":
            m = re.match(r"^(\w+) : (.+)$", line)
            if m:
                params[m[1]] = m[2]
        elif section == "Returns":
            m = re.match(r"^(\w+)(?: : (.+))?$", line)
            if m:
                returns.append((m[1], m[2]))
    return params, returns


def _kind(doc_type: str | None) -> str:
    """The conversion a documented driver parameter type implies."""
    t = doc_type or ""
    for k in ("CUdeviceptr", "CUstream", "CUkernel", "CUfunction_attribute", "CUfunction", "CUdevice",
              "CUresult"):
        if k in t:
            return k
    if t == "Any":
        return "host"           # a host pointer: an int address or an object with the buffer protocol
    return t                    # size_t, unsigned char, unsigned int, int, bytes, ...


C_INT_RANGES = {"size_t": (0, 2**64 - 1), "unsigned char": (0, 255), "unsigned int": (0, 2**32 - 1),
                "int": (-2**31, 2**31 - 1)}


# ====================================================================== 1. library facts

def test_installed_versions_are_the_ones_the_backend_was_written_for():
    import cuda.bindings
    assert int(core.__version__.split(".")[0]) == 1, core.__version__         # cuda.core.experimental is gone in 1.x
    assert int(cuda.bindings.__version__.split(".")[0]) >= 12, cuda.bindings.__version__


def _names_used(path: Path) -> list[tuple[str, object]]:
    text = path.read_text()
    patterns = {
        "engine/backends/cuda.py": [(r"self\._driver\.([A-Za-z_][\w.]*)", real_driver),
                                    (r"\bd\.(cu[A-Za-z]\w*)", real_driver),
                                    (r"\bcore\.([A-Za-z_]\w*)", core)],
        "engine/backends/detect.py": [(r"\bdriver\.([A-Za-z_][\w.]*)", real_driver)],
        "engine/backends/nvrtc.py": [(r"\bnvrtc\.([A-Za-z_]\w*)", real_nvrtc)],
    }[str(path.relative_to(ROOT))]
    found = [(m, mod) for pat, mod in patterns for m in re.findall(pat, text)]
    for names in re.findall(r"from cuda\.core import ([\w, ]+)", text):
        found += [(n.strip(), core) for n in names.split(",")]
    return found


@pytest.mark.parametrize("path", ["engine/backends/cuda.py", "engine/backends/detect.py",
                                  "engine/backends/nvrtc.py"])
def test_every_cuda_name_our_code_spells_exists_in_the_installed_library(path):
    """Catches typos on paths no CPU test runs (e.g. the >48 KiB shared-memory opt-in)."""
    used = _names_used(ROOT / path)
    assert used, f"no cuda names found in {path}: update the patterns"
    missing = []
    for dotted, mod in used:
        obj = mod
        for part in dotted.split("."):
            if not hasattr(obj, part):
                missing.append(f"{mod.__name__}.{dotted}")
                break
            obj = getattr(obj, part)
    assert not missing, f"{path} uses names the installed library lacks: {sorted(set(missing))}"


def test_device_api():
    # _device.pyi:491  def __new__(cls, device_id: Device | int | None=None) -> Device
    assert _params(core.Device.__new__) == ["cls", "device_id"]
    # _device.pyi:597  set_current(self, ctx=None); :645 create_stream(self, obj=None, options=None)
    assert _params(core.Device.set_current) == ["self", "ctx"]
    assert _sig(core.Device.set_current).parameters["ctx"].default is None
    assert [p.default for p in list(_sig(core.Device.create_stream).parameters.values())[1:]] == [None, None]
    # _device.pyi:519/552/564  device_id, name, arch are properties; arch is a string like '90'
    for name in ("device_id", "name", "arch"):
        assert _is_data_descriptor(core.Device, name), name
    assert "'75' for CC 7.5" in inspect.getattr_static(core.Device, "arch").__doc__
    # _stream.pyi:30  streams are non-blocking by default (they do not sync with the legacy stream)
    assert core.StreamOptions().nonblocking is True


def test_stream_and_event_api():
    S = core.Stream
    # _stream.pyi:104  record(self, event=None, options=None) -> Event: both optional, keywordable
    rec = _sig(S.record)
    assert list(rec.parameters) == ["self", "event", "options"]
    assert rec.parameters["event"].default is None and rec.parameters["options"].default is None
    assert rec.return_annotation == "Event"
    # _stream.pyi:130  wait(self, event_or_stream: Event | Stream)
    wait = _sig(S.wait)
    assert list(wait.parameters) == ["self", "event_or_stream"]
    assert {a.strip() for a in wait.parameters["event_or_stream"].annotation.split("|")} == {"Event", "Stream"}
    assert _params(S.sync) == ["self"]                                            # _stream.pyi:102
    assert _sig(S.create_graph_builder).return_annotation == "GraphBuilder"       # _stream.pyi:215
    assert _is_data_descriptor(S, "handle")                                       # _stream.pyi:88 -> CUstream
    # _event.pyi: EventOptions(timing_enabled=False, ...): timing is off unless asked for
    assert core.EventOptions().timing_enabled is False
    assert core.EventOptions(timing_enabled=True).timing_enabled is True
    # _event.pyi:75  __sub__(self, other: Event) -> float (milliseconds: "e2 - e1 milliseconds")
    assert "__sub__" in vars(core.Event) and _params(core.Event.sync) == ["self"]
    assert "milliseconds" in core.Event.__doc__


def test_graph_builder_api_and_the_relaxed_mode():
    B = RealGraphBuilder
    # graph/_graph_builder.pyi:185  begin_building(self, mode: str | None='relaxed') -> GraphBuilder
    bb = _sig(B.begin_building)
    assert list(bb.parameters) == ["self", "mode"] and bb.parameters["mode"].default == "relaxed"
    assert set(_graph_modes()) == {"global", "thread_local", "relaxed"}
    # the mode is checked before any driver call: an unknown one raises ValueError, no GPU needed
    builder = B.__new__(B)
    for bad in ("bogus", "RELAXED", "thread-local"):
        with pytest.raises(ValueError, match="Unsupported build mode"):
            builder.begin_building(bad)
    assert _params(B.end_building) == ["self"]                                    # :204
    assert _params(B.complete) == ["self", "options"]                             # :206
    assert _sig(B.complete).parameters["options"].default is None
    assert _params(B.close) == ["self"]                                           # :128
    assert _params(RealGraph.launch) == ["self", "stream"]                        # :478


def _graph_modes() -> list[str]:
    """The build modes GraphBuilder.begin_building documents."""
    return re.findall(r"- `(\w+)` :", RealGraphBuilder.begin_building.__doc__)


def test_pinned_memory_resource_and_buffer_handle():
    # _memory/_legacy.py:32  allocate(self, size, *, stream=None): the stream is optional (cuMemAllocHost
    # is synchronous), unlike Device.allocate(size, *, stream) (_device.pyi:691) where it is required
    alloc = _sig(core.LegacyPinnedMemoryResource.allocate)
    assert list(alloc.parameters) == ["self", "size", "stream"]
    assert alloc.parameters["stream"].kind is inspect.Parameter.KEYWORD_ONLY
    assert alloc.parameters["stream"].default is None
    assert _sig(core.Device.allocate).parameters["stream"].default is inspect.Parameter.empty
    # _memory/_buffer.pyi:259  Buffer.handle -> int: what host_buffer turns into an address
    buf = core.Buffer.from_handle(0x7F00_0000_1000, 64)      # wraps an address; no driver call
    assert type(buf.handle) is int and int(buf.handle) == 0x7F00_0000_1000


def test_module_and_kernel_api():
    OC = core.ObjectCode
    # _module.pyi:287  from_cubin(module: bytes | str | PathLike, *, name='', symbol_mapping=None)
    fc = _sig(OC.from_cubin)
    assert next(iter(fc.parameters)) == "module" and "bytes" in fc.parameters["module"].annotation
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in list(fc.parameters.values())[1:])
    assert isinstance(inspect.getattr_static(OC, "from_cubin"), staticmethod) or "self" not in fc.parameters
    assert _params(OC.get_kernel) == ["self", "name"]                             # _module.pyi:386
    assert _is_data_descriptor(OC, "code")                                        # :414, Program.compile's output
    # _module.pyi:57  KernelAttributes.num_regs is a property in 1.x (earlier cuda.core had methods
    # taking a device): `k.attributes.num_regs`, without a call, performs the query
    assert _is_data_descriptor(KernelAttributes, "num_regs")
    assert _is_data_descriptor(core.Kernel, "attributes") and _is_data_descriptor(core.Kernel, "handle")


def _handle_types() -> dict[str, str]:
    hpp = CORE_DIR / "_cpp" / "resource_handles.hpp"
    if not hpp.is_file():
        pytest.skip(f"{hpp} is not installed in this build")
    return dict(re.findall(r'as_py\(const (\w+)Handle& h\) noexcept \{\s*return detail::make_py\('
                           r'"cuda\.bindings\.driver", "(\w+)"', hpp.read_text()))


def test_handles_are_driver_objects_that_int_and_the_kernel_one_is_a_CUkernel():
    """_cpp/resource_handles.hpp:1019 and :1043: Stream.handle is a driver.CUstream and
    Kernel.handle a driver.CUkernel (cuda.core 1.x loads cubins with cuLibraryLoadData and gets
    kernels with cuLibraryGetKernel). So the attribute setter for a kernel is cuKernelSetAttribute
    (kernel: CUkernel, then dev: CUdevice), not cuFuncSetAttribute (hfunc: CUfunction first)."""
    handles = _handle_types()
    assert handles["Stream"] == "CUstream" and handles["Kernel"] == "CUkernel"
    ksa, fsa = _driver_doc(real_driver.cuKernelSetAttribute)[0], _driver_doc(real_driver.cuFuncSetAttribute)[0]
    assert list(ksa) == ["attrib", "val", "kernel", "dev"] == _params(real_driver.cuKernelSetAttribute)
    assert _kind(ksa["kernel"]) == "CUkernel" and _kind(ksa["dev"]) == "CUdevice"
    assert list(fsa) == ["hfunc", "attrib", "value"] and _kind(fsa["hfunc"]) == "CUfunction"
    # int() of every handle type gives the address, and each is built from a Python int
    for T in (real_driver.CUstream, real_driver.CUkernel, real_driver.CUdeviceptr, real_driver.CUdevice):
        assert int(T(0x5000)) == 0x5000, T
    assert int(real_driver.CUkernel(real_driver.CUkernel(0x5000))) == 0x5000


def test_launch_config_and_launch():
    # _launcher.pyi:97  launch(stream, config, kernel, *kernel_args)
    assert _params(core.launch) == ["stream", "config", "kernel", "kernel_args"]
    assert _sig(core.launch).parameters["kernel_args"].kind is inspect.Parameter.VAR_POSITIONAL
    # _launch_config.pyi:50  LaunchConfig(grid=, cluster=, block=, shmem_size=, ...): ints or tuples
    c = core.LaunchConfig(grid=(40, 2, 1), block=(256, 1, 1), shmem_size=64 * 1024)
    assert (c.grid, c.block, c.shmem_size) == ((40, 2, 1), (256, 1, 1), 64 * 1024)
    one = core.LaunchConfig(grid=1, block=1)                  # the sanitizer's delay kernel
    assert (one.grid, one.block, one.shmem_size) == ((1, 1, 1), (1, 1, 1), 0)
    # what the launch descriptors must never produce: numpy ints, empty grids
    with pytest.raises(ValueError, match="int"):
        core.LaunchConfig(grid=(np.int64(4), 1, 1), block=(256, 1, 1))
    with pytest.raises(ValueError, match=">= 1"):
        core.LaunchConfig(grid=(0, 1, 1), block=(256, 1, 1))


def _slots(holder, n):
    return list((ctypes.c_void_p * n).from_address(holder.ptr)) if n else []


def test_kernel_arguments_are_marshalled_as_the_kernels_expect():
    """cuda.core's launch() builds its argument array with ParamHolder (_launcher.pyx:
    ``ParamHolder(kernel_args)``). A Python int goes as an 8-byte pointer, a numpy scalar as its
    own C type, a Python float as a double; anything else is refused."""
    args = (0x7F00_0000_2000, np.int32(-7), np.int64(1 << 40), np.uint64(123), np.float32(1.5),
            np.float64(-2.25), 0.5)
    holder = ParamHolder(args)
    raw = [ctypes.string_at(p, n) for p, n in zip(_slots(holder, len(args)), (8, 4, 8, 8, 4, 8, 8))]
    assert raw[0] == (0x7F00_0000_2000).to_bytes(8, "little")
    assert raw[1:6] == [np.asarray(a).tobytes() for a in args[1:6]]
    assert raw[6] == np.float64(0.5).tobytes()                # a Python float is a double, not a float
    for bad in ("x", np.longdouble(1), np.datetime64(1, "s"), object()):
        with pytest.raises(TypeError, match="unsupported type"):
            ParamHolder((bad,))


def test_driver_signatures_and_result_shapes():
    """Parameter order and the tuple each call returns, as cuda.py and detect.py unpack them."""
    expected = {
        # name: (parameters, documented kinds, values returned after the CUresult)
        "cuInit": (["Flags"], ["unsigned int"], []),                            # (err,) = driver.cuInit(0)
        "cuDeviceGetCount": ([], [], ["count"]),                                # err, count = ...
        "cuMemAlloc": (["bytesize"], ["size_t"], ["dptr"]),                     # (ptr,) = _check(...)
        "cuMemFree": (["dptr"], ["CUdeviceptr"], []),
        "cuMemsetD8Async": (["dstDevice", "uc", "N", "hStream"], ["CUdeviceptr", "unsigned char", "size_t", "CUstream"], []),
        "cuMemcpyDtoH": (["dstHost", "srcDevice", "ByteCount"], ["host", "CUdeviceptr", "size_t"], []),
        "cuMemcpyHtoD": (["dstDevice", "srcHost", "ByteCount"], ["CUdeviceptr", "host", "size_t"], []),
        "cuMemcpyHtoDAsync": (["dstDevice", "srcHost", "ByteCount", "hStream"],
                              ["CUdeviceptr", "host", "size_t", "CUstream"], []),
        "cuMemcpyDtoHAsync": (["dstHost", "srcDevice", "ByteCount", "hStream"],
                              ["host", "CUdeviceptr", "size_t", "CUstream"], []),
        "cuKernelSetAttribute": (["attrib", "val", "kernel", "dev"],
                                 ["CUfunction_attribute", "int", "CUkernel", "CUdevice"], []),
        "cuGetErrorName": (["error"], ["CUresult"], ["pStr"]),                  # _, name = ...; name is bytes
    }
    for name, (params, kinds, outs) in expected.items():
        fn = getattr(real_driver, name)
        doc_params, doc_returns = _driver_doc(fn)
        assert _params(fn) == params, f"{name}{_sig(fn)}"
        assert [_kind(doc_params[p]) for p in params] == kinds, (name, doc_params)
        assert doc_returns[0][0] == "CUresult" and [r for r, _ in doc_returns[1:]] == outs, (name, doc_returns)
    assert _driver_doc(real_driver.cuGetErrorName)[1][1] == ("pStr", "bytes")
    assert _kind(_driver_doc(real_driver.cuMemAlloc)[1][1][1]) == "CUdeviceptr"
    # the installed cuda.core unpacks the same shapes: _memory/_legacy.py:57 and :82
    legacy = (CORE_DIR / "_memory" / "_legacy.py").read_text()
    assert "err, ptr = driver.cuMemAllocHost(size)" in legacy and "(err,) = driver.cuMemFreeHost(ptr)" in legacy
    assert real_driver.CUresult.CUDA_SUCCESS == 0 and real_driver.CUresult.CUDA_SUCCESS.name == "CUDA_SUCCESS"
    assert isinstance(real_driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                      real_driver.CUfunction_attribute)
    assert "If `bytesize` is 0" in real_driver.cuMemAlloc.__doc__                # why cuda.py asks for max(n, 1)


def test_detect_catches_what_a_missing_driver_raises():
    """detect_gpu catches RuntimeError around cuInit: a missing libcuda raises cuda.pathfinder's
    DynamicLibNotFoundError, which is one."""
    from cuda.pathfinder import DynamicLibNotFoundError
    assert issubclass(DynamicLibNotFoundError, RuntimeError)
    src = (ROOT / "engine/backends/detect.py").read_text()
    assert "(err,) = driver.cuInit(0)" in src and "except RuntimeError" in src


def _nvrtc_or_skip():
    try:
        nvrtc._nvrtc_version()
    except (ImportError, RuntimeError, OSError) as e:
        pytest.skip(f"NVRTC cannot be loaded: {e}")


def test_nvrtc_program_and_options_as_our_compiler_uses_them():
    _nvrtc_or_skip()
    v = real_nvrtc.nvrtcVersion()
    assert len(v) == 3 and v[0] == real_nvrtc.nvrtcResult.NVRTC_SUCCESS            # err, major, minor
    fields = set(inspect.signature(core.ProgramOptions).parameters)
    assert {"name", "arch", "std"} <= fields
    assert _params(core.Program.compile)[:2] == ["self", "target_type"]
    src = 'extern "C" __global__ void k(float* y, int n, float a) { if (threadIdx.x < n) y[threadIdx.x] *= a; }'
    obj = core.Program(src, code_type="c++", options=nvrtc._options("sm_90")).compile("cubin")
    assert isinstance(obj, core.ObjectCode) and isinstance(obj.code, bytes) and obj.code[:4] == b"\x7fELF"
    assert nvrtc.compile_source(src, "sm_90", cache=False) == bytes(obj.code)
    assert nvrtc.kernel_signatures(obj.code)["k"].param_sizes == (8, 4, 4)


BINDINGS_SCRIPT = textwrap.dedent(r'''
    import ctypes, json, sys
    try:
        ctypes.CDLL("libcuda.so.1")
        print(json.dumps({"skip": "libcuda is loadable here"}))
        sys.exit(0)
    except OSError:
        pass
    import numpy as np
    from cuda.bindings import driver
    host = np.zeros(64, np.uint8)
    h = host.ctypes.data                          # numpy's .ctypes.data: a Python int
    dev, stream = 0x7F0000001000, 0x5555AAAA0000  # int(cuMemAlloc's CUdeviceptr), int(Stream.handle)
    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    kernel = driver.CUkernel(0x5555BBBB0000)      # what Kernel.handle is
    class StreamLike:                             # a cuda.core Stream passed instead of its handle
        def __cuda_stream__(self):
            return (0, stream)
    calls = {
        "cuMemAlloc(int)": lambda: driver.cuMemAlloc(64),
        "cuMemFree(int)": lambda: driver.cuMemFree(dev),
        "cuMemsetD8Async(int, 0xFF, int, int)": lambda: driver.cuMemsetD8Async(dev, 0xFF, 64, stream),
        "cuMemcpyDtoH(int, int, int)": lambda: driver.cuMemcpyDtoH(h, dev, 64),
        "cuMemcpyHtoD(int, int, int)": lambda: driver.cuMemcpyHtoD(dev, h, 64),
        "cuMemcpyHtoDAsync(int, int, int, int)": lambda: driver.cuMemcpyHtoDAsync(dev, h, 64, stream),
        "cuMemcpyDtoHAsync(int, int, int, int)": lambda: driver.cuMemcpyDtoHAsync(h, dev, 64, stream),
        "cuKernelSetAttribute(attr, int, CUkernel, int)": lambda: driver.cuKernelSetAttribute(attr, 65536, kernel, 0),
        "cuGetErrorName(CUresult)": lambda: driver.cuGetErrorName(driver.CUresult.CUDA_ERROR_INVALID_VALUE),
    }
    controls = {
        "stream given as a str": lambda: driver.cuMemsetD8Async(dev, 0xFF, 64, "s"),
        "stream given as a Stream object": lambda: driver.cuMemsetD8Async(dev, 0xFF, 64, StreamLike()),
        "memset value 256": lambda: driver.cuMemsetD8Async(dev, 256, 64, stream),
        "device pointer given as a str": lambda: driver.cuMemcpyHtoDAsync("d", h, 64, stream),
        "host pointer given as a str": lambda: driver.cuMemcpyHtoDAsync(dev, "h", 64, stream),
        "negative device pointer": lambda: driver.cuMemFree(-1),
        "device given as a str": lambda: driver.cuKernelSetAttribute(attr, 65536, kernel, "d"),
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


def test_driver_bindings_accept_the_argument_types_our_code_passes():
    """Each binding converts its arguments before it loads libcuda (a bad one raises TypeError or
    OverflowError first), so where there is no libcuda a call with acceptable arguments ends in
    DynamicLibNotFoundError. Run in a subprocess so that failure cannot touch this one; skipped
    where libcuda exists (the gpu-marked tests make these calls for real there)."""
    out = subprocess.run([sys.executable, "-c", BINDINGS_SCRIPT], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if "skip" in res:
        pytest.skip(res["skip"])
    refused = {k: v for k, v in res["calls"].items() if v[0] not in ("DynamicLibNotFoundError", "returned")}
    assert not refused, f"the installed bindings refuse arguments of the types cuda.py passes: {refused}"
    accepted = {k: v for k, v in res["controls"].items() if v[0] not in ("TypeError", "OverflowError", "ValueError")}
    assert not accepted, f"these should have been refused before loading the driver: {accepted}"


# ====================================================================== 2. the backend, under contract

class ApiMisuse(AssertionError):
    """A call the installed library or the driver would refuse or mishandle."""


REAL = {"Device": core.Device, "Stream": core.Stream, "Event": core.Event, "GraphBuilder": RealGraphBuilder,
        "Graph": RealGraph, "Buffer": core.Buffer, "Kernel": core.Kernel, "ObjectCode": core.ObjectCode,
        "KernelAttributes": KernelAttributes, "LegacyPinnedMemoryResource": core.LegacyPinnedMemoryResource}
OPTIONS = {"EventOptions": core.EventOptions, "LaunchConfig": core.LaunchConfig,
           "StreamOptions": core.StreamOptions, "GraphCompleteOptions": GraphCompleteOptions}
PLAIN = {"None": lambda v: v is None, "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
         "str": lambda v: isinstance(v, str), "bytes": lambda v: isinstance(v, bytes),
         "bytearray": lambda v: isinstance(v, bytearray), "bool": lambda v: isinstance(v, bool)}
HANDLE_KINDS = ("CUdeviceptr", "CUstream", "CUkernel", "CUdevice", "CUfunction")
LEGACY = "legacy stream"


class Contract:
    """Stands for an instance of a real cuda.core class, backed by a fake one."""
    __slots__ = ("_fake", "_kind", "_ledger", "meta")

    def __init__(self, ledger, kind, fake):
        object.__setattr__(self, "_ledger", ledger)
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_fake", fake)
        object.__setattr__(self, "meta", {})

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._ledger.attribute(self, name)

    def __setattr__(self, name, value):
        self._ledger.fail(f"the backend sets {self._kind}.{name}; it only reads cuda.core objects")

    def __sub__(self, other):
        return self._ledger.subtract(self, other)

    def __repr__(self):
        return f"<{self._kind} under contract>"


def _unwrap(v):
    return v._fake if isinstance(v, Contract) else v


class Ledger:
    """The fake CUDA of fake_cuda.py seen through the installed API: each call is bound to the
    real signature, its arguments converted as the real bindings convert them, its results given
    the real types, and the rules below checked. A broken rule raises ApiMisuse and is kept in
    ``violations`` (the backend turns some exceptions into a warning: the list still has them)."""

    def __init__(self, api):
        self.api = api
        self.violations: list[str] = []
        self.contracts: dict[int, tuple[object, Contract]] = {}
        self.device_id = None
        self.device: dict[int, int] = {}        # live cuMemAlloc allocations: base -> bytes
        self.pinned: list[tuple[int, int]] = []  # pinned host ranges from LegacyPinnedMemoryResource
        self.streams: dict[int, Contract] = {}  # int(handle) -> stream
        self.kernels: dict[int, Contract] = {}  # int(CUkernel) -> kernel
        self.dyn_shmem: dict[int, int] = {}     # kernel -> MAX_DYNAMIC_SHARED_SIZE_BYTES set
        self.capture: dict | None = None
        self.inflight: list[tuple[object, int, str]] = []   # (stream or LEGACY, op, what): pageable H2D DMA
        self.op = 0
        self.launched: list[str] = []
        self.driver_calls: list[str] = []
        self.driver = _Namespace(self._driver_attr)
        self.core = _Namespace(self._core_attr)

    # -------------------------------------------------------------- plumbing
    def fail(self, msg: str):
        self.violations.append(msg)
        raise ApiMisuse(msg)

    def wrap(self, kind: str, fake):
        if fake is None:
            return None
        hit = self.contracts.get(id(fake))
        if hit is not None and hit[0] is fake:
            return hit[1]
        c = Contract(self, kind, fake)
        self.contracts[id(fake)] = (fake, c)
        return c

    def wrap_result(self, annotation, result):
        for alt in str(annotation).split("|"):
            if alt.strip() in REAL:
                return self.wrap(alt.strip(), result)
        return result

    def check_types(self, where: str, sig: inspect.Signature, bound: inspect.BoundArguments):
        for name, value in bound.arguments.items():
            p = sig.parameters[name]
            if name in ("self", "cls") or p.kind is p.VAR_POSITIONAL or p.annotation is p.empty:
                continue
            alts = [a.strip() for a in str(p.annotation).split("|")]
            known = [a for a in alts if a in REAL or a in OPTIONS or a in PLAIN]
            if not known:
                continue
            ok = any((a in PLAIN and PLAIN[a](value))
                     or (a in OPTIONS and isinstance(value, OPTIONS[a]))
                     or (a in REAL and isinstance(value, Contract) and value._kind == a) for a in known)
            if not ok and len(known) == len(alts):
                self.fail(f"{where}: {name}={value!r} is not a {p.annotation} (installed signature {sig})")

    def attribute(self, c: Contract, name: str):
        cls = REAL[c._kind]
        try:
            static = inspect.getattr_static(cls, name)
        except AttributeError:
            self.fail(f"{c._kind}.{name}: the installed {cls.__module__}.{cls.__name__} has no such attribute")
        if isinstance(static, (property, types.GetSetDescriptorType, types.MemberDescriptorType)):
            return self.prop(c, name, getattr(c._fake, name))
        sig = _sig(getattr(cls, name))

        def call(*args, **kwargs):
            try:
                bound = sig.bind(c, *args, **kwargs)
            except TypeError as e:
                self.fail(f"{c._kind}.{name}(*{args!r}, **{kwargs!r}) does not fit the installed {name}{sig}: {e}")
            self.check_types(f"{c._kind}.{name}", sig, bound)
            hook = getattr(self, f"before_{c._kind}_{name}", None)
            if hook:
                hook(c, bound.arguments)
            result = getattr(c._fake, name)(*map(_unwrap, args), **{k: _unwrap(v) for k, v in kwargs.items()})
            result = self.wrap_result(sig.return_annotation, result)
            hook = getattr(self, f"after_{c._kind}_{name}", None)
            if hook:
                hook(c, bound.arguments, result)
            return result
        return call

    def prop(self, c: Contract, name: str, value):
        key = (c._kind, name)
        if key == ("Stream", "handle"):       # _cpp/resource_handles.hpp:1019: a driver.CUstream
            return real_driver.CUstream(int(value))
        if key == ("Kernel", "handle"):       # _cpp/resource_handles.hpp:1043: a driver.CUkernel
            return real_driver.CUkernel(c.meta["handle"])
        if key == ("Buffer", "handle"):       # _memory/_buffer.pyi:259: int
            return int(value)
        if key == ("Kernel", "attributes"):
            return self.wrap("KernelAttributes", value)
        if key == ("Device", "arch") and not (isinstance(value, str) and value.isdigit()):
            self.fail(f"Device.arch is a string of digits like '90', the fake gave {value!r}")
        return value

    # -------------------------------------------------------------- streams, events, capture
    def handle_of(self, stream: Contract) -> int:
        return stream.meta["handle"]

    def capturing(self, h) -> bool:
        return self.capture is not None and h in self.capture["members"]

    def work(self, h, what: str):
        """``what`` is issued on stream ``h``."""
        if h not in self.streams:
            self.fail(f"{what}: stream {h!r} is none of the streams Device.create_stream made")
        if self.capture is not None and h not in self.capture["members"]:
            self.fail(f"{what} on stream {h:#x} during graph capture, which that stream has not joined: "
                      "in relaxed mode it runs now instead of being captured")
        self.op += 1
        self.streams[h].meta["last"] = self.op

    def after_Device_create_stream(self, c, args, stream):
        h = int(stream._fake.handle)
        stream.meta.update(handle=h, last=0)
        self.streams[h] = stream

    def after_Stream_record(self, c, args, ev):
        opts = args.get("options")
        self.op += 1
        ev.meta.update(stream=c, op=self.op, timing=bool(opts and opts.timing_enabled), done=False,
                       captured=self.capturing(self.handle_of(c)))

    def before_Stream_wait(self, c, args):
        x, h = args["event_or_stream"], self.handle_of(c)
        if self.capture is None:
            if x._kind == "Event" and x.meta["captured"]:
                self.fail("Stream.wait on an event recorded during a capture, after the capture ended")
            self.op += 1
            return
        cap = self.capture
        src = self.handle_of(x.meta["stream"]) if x._kind == "Event" else self.handle_of(x)
        if h not in cap["members"] and src in cap["members"]:
            self.op += 1                                    # a fork: this stream joins the capture
            cap["members"][h] = self.op
            self.streams[h].meta["last"] = self.op
        elif h == cap["origin"] and src != h and src in cap["members"]:
            cap["rejoined"][src] = x.meta["op"] if x._kind == "Event" else self.op      # a join
        elif h in cap["members"]:
            self.op += 1
            self.streams[h].meta["last"] = self.op

    def before_Stream_sync(self, c, args):
        if self.capturing(self.handle_of(c)):
            self.fail("Stream.sync on a stream that is being captured (cuStreamSynchronize is not allowed)")

    def after_Stream_sync(self, c, args, result):
        for _, ev in self.contracts.values():
            if ev._kind == "Event" and ev.meta.get("stream") is c:
                ev.meta["done"] = True
        self.inflight = [f for f in self.inflight if f[0] != self.handle_of(c)]

    def before_Event_sync(self, c, args):
        if self.capturing(self.handle_of(c.meta["stream"])):
            self.fail("Event.sync on an event of a stream that is being captured")

    def after_Event_sync(self, c, args, result):
        c.meta["done"] = True
        h = self.handle_of(c.meta["stream"])
        self.inflight = [f for f in self.inflight if not (f[0] == h and f[1] < c.meta["op"])]

    def subtract(self, a, b):
        if not (isinstance(b, Contract) and a._kind == b._kind == "Event"):
            self.fail(f"{a!r} - {b!r}: only Event - Event is defined (_event.pyi: __sub__(self, other: Event))")
        for e in (a, b):
            if not e.meta["timing"]:
                self.fail("Event subtraction needs both events created with EventOptions(timing_enabled=True)")
            if not e.meta["done"]:
                self.fail("Event subtraction before the event completed (CUDA_ERROR_NOT_READY): "
                          "sync its stream or the event first")
        return a._fake - b._fake

    def after_Stream_create_graph_builder(self, c, args, builder):
        builder.meta["stream"] = c

    def before_GraphBuilder_begin_building(self, c, args):
        mode = args.get("mode", "relaxed")
        if mode not in _graph_modes():
            self.fail(f"begin_building({mode!r}): the installed GraphBuilder accepts {_graph_modes()}")
        if self.capture is not None:
            self.fail("begin_building while another capture is open")
        h = self.handle_of(c.meta["stream"])
        self.op += 1
        self.capture = {"builder": c, "origin": h, "members": {h: self.op}, "rejoined": {}}

    def before_GraphBuilder_end_building(self, c, args):
        cap = self.capture
        if cap is None or cap["builder"] is not c:
            self.fail("end_building on a builder that is not building (RuntimeError in cuda.core)")
        unjoined = [f"{h:#x}" for h in cap["members"] if h != cap["origin"]
                    and cap["rejoined"].get(h, -1) < self.streams[h].meta["last"]]
        if unjoined:
            self.fail(f"end_building with streams {unjoined} forked into the capture and not joined back to "
                      "the capturing stream (CUDA_ERROR_STREAM_CAPTURE_UNJOINED)")

    def after_GraphBuilder_end_building(self, c, args, result):
        self.capture = None
        c.meta["ended"] = True

    def before_GraphBuilder_complete(self, c, args):
        if not c.meta.get("ended"):
            self.fail("GraphBuilder.complete before end_building")

    def after_GraphBuilder_close(self, c, args, result):
        if self.capture is not None and self.capture["builder"] is c:
            self.capture = None

    def before_Graph_launch(self, c, args):
        self.work(self.handle_of(args["stream"]), "Graph.launch")

    def after_LegacyPinnedMemoryResource_allocate(self, c, args, buf):
        start = int(buf._fake.handle)
        self.pinned.append((start, start + int(args["size"])))

    def after_ObjectCode_get_kernel(self, c, args, kernel):
        h = 0x7A00_0000 + 0x100 * len(self.kernels)
        kernel.meta.update(handle=h, name=args["name"])
        self.kernels[h] = kernel

    # -------------------------------------------------------------- cuda.core module functions
    def _core_attr(self, name):
        if name in ("EventOptions", "LaunchConfig"):
            return getattr(core, name)                       # the real ones: they need no driver
        if name == "Device":
            return self.make_device
        if name == "LegacyPinnedMemoryResource":
            return self.make_pinned
        if name == "ObjectCode":
            return SimpleNamespace(from_cubin=self.from_cubin)
        if name == "launch":
            return self.launch
        if not hasattr(core, name):
            self.fail(f"the backend uses cuda.core.{name}, which the installed cuda.core lacks")
        raise AssertionError(f"the backend uses cuda.core.{name}: teach this contract test about it")

    def make_device(self, *args, **kwargs):
        try:
            _sig(core.Device.__new__).bind(core.Device, *args, **kwargs)
        except TypeError as e:
            self.fail(f"Device(*{args}, **{kwargs}): {e}")
        dev = self.wrap("Device", self.api.core.Device(*args, **kwargs))
        self.device_id = dev._fake.device_id
        return dev

    def make_pinned(self, *args, **kwargs):
        if args or kwargs:
            self.fail("LegacyPinnedMemoryResource() takes no arguments")
        return self.wrap("LegacyPinnedMemoryResource", self.api.core.LegacyPinnedMemoryResource())

    def from_cubin(self, *args, **kwargs):
        sig = _sig(core.ObjectCode.from_cubin)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            self.fail(f"ObjectCode.from_cubin: {e}")
        self.check_types("ObjectCode.from_cubin", sig, bound)
        return self.wrap("ObjectCode", self.api.core.ObjectCode.from_cubin(*args, **kwargs))

    def in_device(self, ptr: int, n: int) -> bool:
        return any(base <= ptr and ptr + n <= base + size for base, size in self.device.items())

    def is_pinned(self, ptr: int, n: int) -> bool:
        return any(s <= ptr and ptr + n <= e for s, e in self.pinned)

    def launch(self, *args, **kwargs):
        sig = _sig(core.launch)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            self.fail(f"launch: {e} (installed launch{sig})")
        stream, config, kernel = bound.arguments["stream"], bound.arguments["config"], bound.arguments["kernel"]
        kargs = bound.arguments.get("kernel_args", ())
        if not (isinstance(stream, Contract) and stream._kind == "Stream"):
            self.fail(f"launch: stream {stream!r} is not a Stream")
        if not isinstance(config, core.LaunchConfig):
            self.fail(f"launch: config {config!r} is not a cuda.core.LaunchConfig")
        if not (isinstance(kernel, Contract) and kernel._kind == "Kernel"):
            self.fail(f"launch: kernel {kernel!r} is not a Kernel from ObjectCode.get_kernel")
        name = kernel.meta["name"]
        try:
            holder = ParamHolder(kargs)
        except (TypeError, ValueError, OverflowError) as e:
            self.fail(f"launch of {name}: cuda.core cannot marshal its arguments {kargs!r}: {e}")
        for i, (a, slot) in enumerate(zip(kargs, _slots(holder, len(kargs)))):
            if isinstance(a, (bool, float)) and not isinstance(a, np.generic):
                self.fail(f"launch of {name}: argument {i} is a Python {type(a).__name__}, passed as a "
                          f"{'pointer' if isinstance(a, bool) else 'double'}")
            if isinstance(a, int) and not isinstance(a, np.generic):
                want = a.to_bytes(8, "little", signed=True)
                if not self.in_device(a, 0):
                    self.fail(f"launch of {name}: argument {i} = {a:#x} goes as a pointer but points into no "
                              "device allocation")
            else:
                want = np.asarray(a).tobytes()
            if ctypes.string_at(slot, len(want)) != want:
                self.fail(f"launch of {name}: argument {i} ({a!r}) is marshalled as other bytes than its value")
        if config.shmem_size > STATIC_SHARED_LIMIT and self.dyn_shmem.get(kernel.meta["handle"], 0) < config.shmem_size:
            self.fail(f"launch of {name} with {config.shmem_size} bytes of dynamic shared memory without "
                      "cuKernelSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) first (CUDA_ERROR_INVALID_VALUE)")
        self.work(self.handle_of(stream), f"launch of {name}")
        self.launched.append(name)
        # logged as fake_cuda's launch logs, without its argument check: that one refuses np.float64
        # (a float subclass), which cuda.core passes correctly as a double (see KNOWN_FAKE_REFUSALS)
        fake_kernel = kernel._fake
        self.api.run(lambda: self.api.launches.append((fake_kernel.name, config.grid, config.block, kargs)))

    # -------------------------------------------------------------- cuda.bindings.driver
    def _driver_attr(self, name):
        try:
            real = getattr(real_driver, name)
        except AttributeError:
            self.fail(f"the backend uses driver.{name}, which the installed cuda.bindings.driver lacks")
        if isinstance(real, type) or not callable(real):
            return real                                     # enums and handle types: the real ones
        fake = getattr(self.api.driver, name, None)
        return lambda *args, **kwargs: self.driver_call(name, fake, args, kwargs)

    def convert(self, fn: str, pname: str, kind: str, v):
        bad = f"driver.{fn}: {pname}={v!r}"
        if kind in HANDLE_KINDS:
            cls = getattr(real_driver, kind)
            if v is None:
                return 0
            if isinstance(v, cls):
                return int(v)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                self.fail(f"{bad} is neither a {kind} nor an int")
            try:
                return int(cls(v))
            except (TypeError, OverflowError, ValueError) as e:
                self.fail(f"{bad} is refused as a {kind}: {e}")
        if kind == "host":
            if isinstance(v, int) and not isinstance(v, bool):
                return v
            if v is None:
                return 0
            try:
                return np.frombuffer(memoryview(v), np.uint8).ctypes.data
            except TypeError:
                self.fail(f"{bad} is neither an int address nor a buffer")
        if kind in ("CUfunction_attribute", "CUresult"):
            enum = getattr(real_driver, kind)
            try:
                return v if isinstance(v, enum) else enum(operator.index(v))
            except (TypeError, ValueError) as e:
                self.fail(f"{bad} is no {kind}: {e}")
        if kind in C_INT_RANGES:
            try:
                i = operator.index(v)
            except TypeError:
                self.fail(f"{bad} is not an integer ({kind})")
            lo, hi = C_INT_RANGES[kind]
            if not lo <= i <= hi:
                self.fail(f"{bad} does not fit a C {kind} (OverflowError)")
            return i
        return v

    def driver_call(self, name, fake, args, kwargs):
        real = getattr(real_driver, name)
        sig = _sig(real)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            self.fail(f"driver.{name}{args}: {e} (installed driver.{name}{sig})")
        doc_params, doc_returns = _driver_doc(real)
        v = {p: self.convert(name, p, _kind(doc_params.get(p)), x) for p, x in bound.arguments.items()}
        self.driver_calls.append(name)
        getattr(self, f"rule_{name}", lambda v: None)(v)
        if fake is None:
            if name not in ("cuCtxSynchronize", "cuStreamSynchronize"):
                self.fail(f"the backend calls driver.{name}, which fake_cuda.py does not provide")
            result = (0,)
        else:
            result = fake(*v.values())
        if not isinstance(result, tuple) or len(result) != len(doc_returns):
            self.fail(f"fake driver.{name} returned {result!r}; the installed binding returns "
                      f"({', '.join(r for r, _ in doc_returns)})")
        out = [real_driver.CUresult(int(result[0]))]
        for (rname, rtype), value in zip(doc_returns[1:], result[1:]):
            k = _kind(rtype)
            out.append(getattr(real_driver, k)(int(value)) if k in HANDLE_KINDS else value)
        out = tuple(out)
        if out[0] == real_driver.CUresult.CUDA_SUCCESS:
            getattr(self, f"done_{name}", lambda v, out: None)(v, out)
        return out

    def _no_capture(self, what):
        if self.capture is not None:
            self.fail(f"{what} during graph capture (not captured, and not allowed in the graph's stream order)")

    def _device_range(self, fn, ptr, n):
        if not self.in_device(ptr, n):
            self.fail(f"driver.{fn}: [{ptr:#x}, +{n}) is not inside any live cuMemAlloc allocation")

    def _host_range(self, fn, ptr, n):
        if self.in_device(ptr, max(n, 1)):
            self.fail(f"driver.{fn}: host pointer {ptr:#x} lies in device memory (arguments swapped?)")

    def rule_cuMemAlloc(self, v):
        self._no_capture("cuMemAlloc")
        if v["bytesize"] == 0:
            self.fail("cuMemAlloc(0) returns CUDA_ERROR_INVALID_VALUE")

    def done_cuMemAlloc(self, v, out):
        self.device[int(out[1])] = v["bytesize"]

    def rule_cuMemFree(self, v):
        self._no_capture("cuMemFree")
        if v["dptr"] not in self.device:
            self.fail(f"cuMemFree({v['dptr']:#x}): not the start of a live cuMemAlloc allocation")

    def done_cuMemFree(self, v, out):
        del self.device[v["dptr"]]

    def rule_cuMemsetD8Async(self, v):
        self._device_range("cuMemsetD8Async", v["dstDevice"], v["N"])
        self.work(v["hStream"], "cuMemsetD8Async")

    def rule_cuMemcpyHtoD(self, v):
        self._no_capture("cuMemcpyHtoD")
        self._device_range("cuMemcpyHtoD", v["dstDevice"], v["ByteCount"])
        self._host_range("cuMemcpyHtoD", v["srcHost"], v["ByteCount"])

    def done_cuMemcpyHtoD(self, v, out):
        if not self.is_pinned(v["srcHost"], v["ByteCount"]):
            # api-sync-behavior: from pageable memory the call returns once the data is staged;
            # "the DMA to final destination may not have completed"
            self.inflight.append((LEGACY, self.op, "cuMemcpyHtoD from pageable memory"))

    def rule_cuMemcpyDtoH(self, v):
        self._no_capture("cuMemcpyDtoH")
        self._device_range("cuMemcpyDtoH", v["srcDevice"], v["ByteCount"])
        self._host_range("cuMemcpyDtoH", v["dstHost"], v["ByteCount"])

    def done_cuMemcpyDtoH(self, v, out):
        # it runs in order on the legacy stream and returns once complete
        self.inflight = [f for f in self.inflight if f[0] != LEGACY]

    def _async_copy(self, fn, dev, host, n, h):
        self._device_range(fn, dev, n)
        self._host_range(fn, host, n)
        if self.capture is not None and not self.is_pinned(host, n):
            self.fail(f"{fn} from pageable host memory during graph capture (not capturable)")
        self.work(h, fn)

    def rule_cuMemcpyHtoDAsync(self, v):
        self._async_copy("cuMemcpyHtoDAsync", v["dstDevice"], v["srcHost"], v["ByteCount"], v["hStream"])

    def done_cuMemcpyHtoDAsync(self, v, out):
        if not self.is_pinned(v["srcHost"], v["ByteCount"]):
            self.inflight.append((v["hStream"], self.op, "cuMemcpyHtoDAsync from pageable memory"))

    def rule_cuMemcpyDtoHAsync(self, v):
        self._async_copy("cuMemcpyDtoHAsync", v["srcDevice"], v["dstHost"], v["ByteCount"], v["hStream"])

    def rule_cuKernelSetAttribute(self, v):
        if v["kernel"] not in self.kernels:
            self.fail(f"cuKernelSetAttribute: kernel {v['kernel']:#x} is no Kernel.handle from get_kernel")
        if v["dev"] != self.device_id:
            self.fail(f"cuKernelSetAttribute: device {v['dev']} is not the backend's device {self.device_id}")
        if v["val"] < 0:
            self.fail(f"cuKernelSetAttribute: negative value {v['val']}")

    def done_cuKernelSetAttribute(self, v, out):
        if v["attrib"] == real_driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
            self.dyn_shmem[v["kernel"]] = v["val"]

    def rule_cuCtxSynchronize(self, v):
        self._no_capture("cuCtxSynchronize")

    def done_cuCtxSynchronize(self, v, out):
        self.inflight.clear()

    def rule_cuStreamSynchronize(self, v):
        if self.capturing(v["hStream"]):
            self.fail("cuStreamSynchronize on a stream that is being captured")

    def done_cuStreamSynchronize(self, v, out):
        h = LEGACY if v["hStream"] in (0, 1) else v["hStream"]          # 0 and CU_STREAM_LEGACY
        self.inflight = [f for f in self.inflight if f[0] != h]


class _Namespace:
    def __init__(self, lookup):
        self._lookup = lookup

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._lookup(name)


@pytest.fixture
def ledger(monkeypatch):
    api = fake_cuda.install(monkeypatch)
    led = Ledger(api)
    monkeypatch.setattr(cuda_backend, "_cuda_api", lambda: (led.driver, led.core))
    return led


BIG = "contract_big_shmem"


class _BigSharedMemoryOp:
    """A stand-in operator whose kernel asks for 64 KiB of dynamic shared memory (no real operator
    does yet), so the backend's cuKernelSetAttribute path runs."""

    def cuda_launches(self, attrs, ins, outs):
        n = int(np.prod(outs[0].shape))
        return [Launch(kernel="contract_big_shmem_k", grid=(1, 1, 1), block=(256, 1, 1), shmem=64 * 1024,
                       args=(OUT(0), IN(0), np.int32(n)),
                       covers=Coverage(target=OUT(0), extents=(n,), per_block=(0,)))]

    def cuda_workspaces(self, attrs, ins, outs):
        return ()


@pytest.fixture
def big_op(monkeypatch):
    get = cuda_backend.op_registry.get
    monkeypatch.setattr(cuda_backend.op_registry, "get", lambda name: _BigSharedMemoryOp() if name == BIG else get(name))


def _node(op, nid, **attrs):
    return SimpleNamespace(op=op, attrs=attrs, id=nid)


def _no_violations(ledger):
    assert ledger.violations == [], "\n".join(ledger.violations)


def test_the_backend_uses_the_installed_api_correctly(ledger, big_op):
    be = CudaBackend()
    try:
        be.allocate_arena(0)                     # an empty arena is legal; cuMemAlloc(0) is not
        be.allocate_arena(1 << 16)
        x, y = be.view(0, (100,), np.float32), be.view(1024, (100,), np.float32)
        data = np.linspace(-1, 1, 100, dtype=np.float32)
        be.write(x, data)
        np.testing.assert_array_equal(be.read(x), data)
        host_in, host_out = be.host_buffer((100,), np.float32), be.host_buffer((100,), np.float32)
        host_in[:] = data

        def iteration():
            be.copy_h2d(SWAP_IN, x, host_in)
            be.wait(COMPUTE, be.record(SWAP_IN))
            be.launch(COMPUTE, _node("relu", 1), [x], [y])
            be.launch(COMPUTE, _node(BIG, 2), [x], [y])
            be.wait(SWAP_OUT, be.record(COMPUTE))
            be.copy_d2h(SWAP_OUT, host_out, y)

        iteration()
        be.synchronize()
        be.timings = []
        iteration()
        be.synchronize()
        assert sorted(s for s, *_ in be.timings) == [COMPUTE, COMPUTE, SWAP_IN, SWAP_OUT]
        be.timings = None
        graph = be.capture(iteration)
        _no_violations(ledger)
        assert graph is not None
        for _ in range(2):
            be.replay(graph)
            be.synchronize()
        be.timings = []
        be.replay(graph)
        be.synchronize()
        be.timings = None
    finally:
        be.close()
    _no_violations(ledger)
    assert ledger.device == {}                                    # everything allocated was freed
    assert {"relu_fwd", "contract_big_shmem_k"} <= set(ledger.launched)
    assert 64 * 1024 in ledger.dyn_shmem.values()
    assert ledger.driver_calls


def test_the_sanitizer_uses_the_installed_api_correctly(ledger, tmp_path, monkeypatch):
    if "sanitize" not in inspect.signature(CudaBackend).parameters:
        pytest.skip("this CudaBackend has no sanitizer")
    _nvrtc_or_skip()
    monkeypatch.setenv("SWAPENGINE_KERNEL_CACHE", str(tmp_path))
    be = CudaBackend(sanitize=True, seed=1, jitter_s=1e-5)
    try:
        be.allocate_arena(1 << 16)
        x, y = be.view(0, (100,), np.float32), be.view(1024, (100,), np.float32)
        host_in, host_out = be.host_buffer((100,), np.float32), be.host_buffer((100,), np.float32)
        host_in[:] = 2
        be.copy_h2d(SWAP_IN, x, host_in)
        be.wait(COMPUTE, be.record(SWAP_IN))
        be.launch(COMPUTE, _node("relu", 1), [x], [y])
        be.wait(SWAP_OUT, be.record(COMPUTE))
        be.copy_d2h(SWAP_OUT, host_out, y)
        be.synchronize()
    finally:
        be.close()
    _no_violations(ledger)
    assert "sanitizer_delay" in ledger.launched


def test_every_operator_launch_passes_the_real_launch_config_and_argument_marshaller(ledger):
    """Every launch of every operator case, through the backend: the installed LaunchConfig takes
    its grid, block and shared memory, and the installed ParamHolder its arguments, byte for byte."""
    be = CudaBackend()
    takes_scratch = "scratch_bytes" in inspect.signature(be.allocate_arena).parameters
    try:
        for k, c in enumerate(all_cases()):
            scratch = c.decl.workspace(c.attrs, c.ins, c.outs)
            sizes = [-(-int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize // 256) * 256 + 256
                     for t in (*c.ins, *c.outs)]
            if takes_scratch:
                be.allocate_arena(sum(sizes) + scratch, scratch)
            else:
                be.allocate_arena(sum(sizes))
            offsets = np.cumsum([0] + sizes[:-1])
            views = [be.view(int(o), t.shape, t.dtype) for o, t in zip(offsets, (*c.ins, *c.outs))]
            try:
                be.launch(COMPUTE, _node(c.op, k, **c.attrs), views[:len(c.ins)], views[len(c.ins):])
            except ApiMisuse:
                pass                                  # kept in ledger.violations, reported below
        be.synchronize()
    finally:
        be.close()
    _no_violations(ledger)
    assert len(ledger.launched) >= len(all_cases())


def test_write_leaves_no_host_to_device_copy_in_flight(ledger):
    be = CudaBackend()
    try:
        be.allocate_arena(1 << 16)
        x = be.view(0, (1000,), np.float32)
        be.write(x, np.arange(1000, dtype=np.float32))
        assert ledger.inflight == [], ledger.inflight     # the next kernel on any stream may read x
    finally:
        be.close()
    _no_violations(ledger)


# ====================================================================== 3. the fake against the real API

def _fake_objects(monkeypatch):
    api = fake_cuda.install(monkeypatch)
    stream = api.core.Device(0).create_stream()
    kernel = api.core.ObjectCode.from_cubin(b"cubin").get_kernel("k")
    return api, stream, kernel


def _raises(fn) -> bool:
    try:
        fn()
    except Exception:  # noqa: BLE001 - any refusal counts
        return True
    return False


def _succeeded(result):
    if result[0] != 0:
        raise RuntimeError(f"CUresult {result[0]}")


def _fake_gaps(monkeypatch) -> dict[str, str]:
    """What the fake accepts although the installed library or the driver refuses it: name ->
    the evidence for the refusal. Each entry is checked live where that needs no driver."""
    api, stream, kernel = _fake_objects(monkeypatch)
    d, c = api.driver, api.core
    _, ptr = d.cuMemAlloc(64)
    pinned = c.LegacyPinnedMemoryResource().allocate(64)
    probes = {}

    def probe(name, real_refuses: bool, fake_call, evidence: str):
        assert real_refuses, f"{name}: the installed library does not refuse it after all ({evidence})"
        if not _raises(fake_call):
            probes[name] = evidence

    probe("LaunchConfig with numpy ints in grid",
          _raises(lambda: core.LaunchConfig(grid=(np.int64(2), 1, 1), block=(256, 1, 1))),
          lambda: c.LaunchConfig(grid=(np.int64(2), 1, 1), block=(256, 1, 1)), "ValueError from LaunchConfig")
    probe("LaunchConfig with a zero grid",
          _raises(lambda: core.LaunchConfig(grid=(0, 1, 1), block=(256, 1, 1))),
          lambda: c.LaunchConfig(grid=(0, 1, 1), block=(256, 1, 1)), "ValueError from LaunchConfig")
    probe("launch with a numpy scalar type cuda.core cannot marshal",
          _raises(lambda: ParamHolder((np.longdouble(1),))),
          lambda: c.launch(stream, c.LaunchConfig(grid=1, block=1), kernel, np.longdouble(1)),
          "TypeError from ParamHolder (np.longdouble, np.str_, np.datetime64 ...)")
    probe("begin_building with an unknown mode",
          _raises(lambda: RealGraphBuilder.__new__(RealGraphBuilder).begin_building("bogus")),
          lambda: stream.create_graph_builder().begin_building("bogus"), "ValueError: Unsupported build mode")
    api.capture = None
    probe("end_building without begin_building", True,
          lambda: stream.create_graph_builder().end_building(),
          "RuntimeError('Graph builder is not building.'), graph/_graph_builder.pyx end_building")
    api.capture = None
    probe("cuMemAlloc(0)", "If `bytesize` is 0" in real_driver.cuMemAlloc.__doc__,
          lambda: _succeeded(d.cuMemAlloc(0)),
          "cuMemAlloc docstring: returns CUDA_ERROR_INVALID_VALUE")
    probe("cuMemFree of memory cuMemAlloc did not return (pinned host memory)", True,
          lambda: _succeeded(d.cuMemFree(int(pinned.handle))),
          "cuMemFree docstring: dptr must come from cuMemAlloc & co.")
    probe("cuMemsetD8Async with a value above 255",
          _kind(_driver_doc(real_driver.cuMemsetD8Async)[0]["uc"]) == "unsigned char",
          lambda: d.cuMemsetD8Async(ptr, 256, 1, 0), "uc is a C unsigned char: OverflowError")
    probe("driver call given a Stream object instead of int(stream.handle)",
          _raises(lambda: real_driver.CUstream(stream)),
          lambda: d.cuMemsetD8Async(ptr, 0, 1, stream), "TypeError: an integer is required")
    probe("cuKernelSetAttribute with the wrong number of arguments",
          len(_params(real_driver.cuKernelSetAttribute)) == 4,
          lambda: d.cuKernelSetAttribute(1, 2), "cuKernelSetAttribute(attrib, val, kernel, dev)")
    return probes


# What fake_cuda.py accepts and the installed library refuses. When the fake is tightened, drop
# the entry here; a new entry means the fake became laxer than the real API.
KNOWN_FAKE_GAPS = {
    "LaunchConfig with numpy ints in grid",
    "LaunchConfig with a zero grid",
    "launch with a numpy scalar type cuda.core cannot marshal",
    "begin_building with an unknown mode",
    "end_building without begin_building",
    "cuMemAlloc(0)",
    "cuMemFree of memory cuMemAlloc did not return (pinned host memory)",
    "cuMemsetD8Async with a value above 255",
    "driver call given a Stream object instead of int(stream.handle)",
    "cuKernelSetAttribute with the wrong number of arguments",
}


# What fake_cuda.py refuses although the installed library accepts it.
KNOWN_FAKE_REFUSALS = {
    "launch with a Python float argument",          # by design: our descriptors never pass one
    "LaunchConfig(...).shmem_size",                 # the fake's config calls it .shmem
    "LaunchConfig(grid=1, block=1) normalised to 3-tuples",   # the fake keeps the ints
}


def _fake_refusals(monkeypatch) -> set[str]:
    api, stream, kernel = _fake_objects(monkeypatch)
    config = api.core.LaunchConfig(grid=(1, 1, 1), block=(1, 1, 1))
    probes = {"launch with a np.float64 argument": np.float64(0.5),
              "launch with a Python float argument": 0.5,
              "launch with a np.float32 argument": np.float32(0.5),
              "launch with a np.int64 argument": np.int64(5),
              "launch with a np.uint64 argument": np.uint64(5),
              "launch with a Python int (pointer) argument": 0x1000}
    out = set()
    for name, arg in probes.items():
        assert not _raises(lambda arg=arg: ParamHolder((arg,))), name   # the installed marshaller takes it
        if _raises(lambda arg=arg: api.core.launch(stream, config, kernel, arg)):
            out.add(name)
    assert core.LaunchConfig(grid=1, block=1).shmem_size == 0
    if _raises(lambda: api.core.LaunchConfig(grid=1, block=1).shmem_size):
        out.add("LaunchConfig(...).shmem_size")
    real, fake = core.LaunchConfig(grid=1, block=1), api.core.LaunchConfig(grid=1, block=1)
    assert (real.grid, real.block) == ((1, 1, 1), (1, 1, 1))
    if (fake.grid, fake.block) != (real.grid, real.block):
        out.add("LaunchConfig(grid=1, block=1) normalised to 3-tuples")
    return out


def test_where_the_fake_is_stricter_or_shaped_unlike_the_installed_api(monkeypatch):
    refused = _fake_refusals(monkeypatch)
    assert refused == KNOWN_FAKE_REFUSALS, (
        f"fake_cuda.py now accepts {sorted(KNOWN_FAKE_REFUSALS - refused)} and newly refuses "
        f"{sorted(refused - KNOWN_FAKE_REFUSALS)}: update KNOWN_FAKE_REFUSALS")


def test_where_the_fake_is_laxer_than_the_installed_api(monkeypatch):
    gaps = _fake_gaps(monkeypatch)
    assert set(gaps) == KNOWN_FAKE_GAPS, (
        f"fake_cuda.py now refuses {sorted(KNOWN_FAKE_GAPS - set(gaps))} (remove them from KNOWN_FAKE_GAPS) "
        f"and newly accepts {sorted(set(gaps) - KNOWN_FAKE_GAPS)} (the real API refuses them)")


def test_the_fake_methods_the_backend_calls_take_the_real_parameters(monkeypatch):
    """Same parameter names (the backend may pass them by keyword) and arity as the installed API."""
    api, stream, _ = _fake_objects(monkeypatch)
    pairs = [
        (stream.record, core.Stream.record), (stream.wait, core.Stream.wait), (stream.sync, core.Stream.sync),
        (stream.create_graph_builder, core.Stream.create_graph_builder),
        (stream.create_graph_builder().begin_building, RealGraphBuilder.begin_building),
        (api.core.LegacyPinnedMemoryResource().allocate, core.LegacyPinnedMemoryResource.allocate),
        (api.core.Device(0).create_stream, core.Device.create_stream),
    ]
    api.capture = None
    for fake, real in pairs:
        fp = list(_sig(fake).parameters.values())
        rp = [p for p in _sig(real).parameters.values() if p.name != "self"]
        assert [p.name for p in fp] == [p.name for p in rp][:len(fp)], (fake, _sig(real))
        assert [p.kind for p in fp] == [p.kind for p in rp][:len(fp)], (fake, _sig(real))
    for name in ("cuMemAlloc", "cuMemFree", "cuMemsetD8Async", "cuMemcpyHtoD", "cuMemcpyDtoH",
                 "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuGetErrorName"):
        assert len(_params(getattr(api.driver, name))) == len(_params(getattr(real_driver, name))), name
