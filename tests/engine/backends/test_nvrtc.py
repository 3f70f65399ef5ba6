"""NVRTC compilation of the operators' CUDA C (engine/backends/nvrtc.py), without a GPU:
every family compiles to cubin for sm_90, every kernel an operator names or launches is in
it, and every launch passes arguments of the sizes the kernel's parameters have."""
import numpy as np
import pytest

import ops
from engine.backends import nvrtc
from tests.ops.cuda_cases import all_cases

ARCH = "sm_90"
STATIC_SHARED_LIMIT = 48 * 1024


def _nvrtc_or_skip():
    pytest.importorskip("cuda.core")
    try:
        nvrtc._nvrtc_version()
    except (ImportError, RuntimeError, OSError) as e:     # DynamicLibNotFoundError is a RuntimeError
        pytest.skip(f"NVRTC cannot be loaded: {e}")


@pytest.fixture(scope="module")
def compiled():
    _nvrtc_or_skip()
    cubins = nvrtc.compile_all(ARCH)
    sigs = {}
    for cubin in {id(c): c for c in cubins.values()}.values():
        sigs.update(nvrtc.kernel_signatures(cubin))
    return cubins, sigs


def test_every_family_compiles_and_defines_kernels(compiled):
    cubins, sigs = compiled
    assert set(sigs) == set(cubins)
    for family in nvrtc.FAMILIES:
        assert any(c == nvrtc.compile_family(family, ARCH) for c in cubins.values()), family


def test_the_sanitizers_delay_kernel_compiles():
    _nvrtc_or_skip()
    sigs = nvrtc.kernel_signatures(nvrtc.compile_sanitizer(ARCH))
    assert sigs["sanitizer_delay"].param_sizes == (8,)       # an unsigned long long of nanoseconds


BOOL_ONLY = ("logic_binary", "logic_not", "logic_reduce")     # ops/logic.py: bool tensors only, no float64


def test_every_declared_kernel_exists_in_both_precisions(compiled):
    _, sigs = compiled
    for name, op in ops.REGISTRY.items():
        for k in op.cuda_kernels:
            assert k in sigs, f"{name} names kernel '{k}', which no .cu file defines"
            if k not in ("fill_b32", "fill_b64", "copy_rows") + BOOL_ONLY:     # dtype-agnostic kernels
                twin = k[:-4] + "_f64_i64" if k.endswith("_i64") else k + "_f64"
                assert twin in sigs, f"{k} has no float64 twin"


def _arg_size(a) -> int:
    return 8 if isinstance(a, tuple) else np.asarray(a).dtype.itemsize


@pytest.mark.parametrize("c", all_cases(), ids=lambda c: c.id)
def test_launches_match_kernel_signatures(compiled, c):
    _, sigs = compiled
    for l in c.decl.cuda_launches(c.attrs, c.ins, c.outs):
        assert l.kernel in sigs, f"{c.op} launches '{l.kernel}', which is not compiled"
        sig = sigs[l.kernel]
        sizes = tuple(_arg_size(a) for a in l.args)
        assert sizes == sig.param_sizes, f"{l.kernel}: arguments of {sizes} bytes, parameters {sig.param_sizes}"
        assert sig.static_shared_bytes + l.shmem <= STATIC_SHARED_LIMIT, l.kernel


def test_a_broken_source_raises_with_nvrtc_log(tmp_path, monkeypatch):
    _nvrtc_or_skip()
    monkeypatch.setenv("SWAPENGINE_KERNEL_CACHE", str(tmp_path))
    src = 'extern "C" __global__ void broken(float* y) { y[0] = not_declared_anywhere; }'
    with pytest.raises(nvrtc.KernelCompileError) as err:
        nvrtc.compile_source(src, ARCH, "broken.cu")
    msg = str(err.value)
    assert "broken.cu" in msg and ARCH in msg
    assert "not_declared_anywhere" in msg and "undefined" in msg     # NVRTC's own log
    assert not list(tmp_path.iterdir())                                # nothing cached


def test_cache_round_trip(tmp_path, monkeypatch):
    _nvrtc_or_skip()
    monkeypatch.setenv("SWAPENGINE_KERNEL_CACHE", str(tmp_path))
    src = 'extern "C" __global__ void twice(float* y, int n) { if (threadIdx.x < n) y[threadIdx.x] *= 2.0f; }'
    first = nvrtc.compile_source(src, ARCH)
    files = list(tmp_path.glob("*.cubin"))
    assert len(files) == 1 and files[0].read_bytes() == first
    files[0].write_bytes(first + b"marker")            # a hit is served from the file
    assert nvrtc.compile_source(src, ARCH) == first + b"marker"
    assert nvrtc.compile_source(src + " ", ARCH) == first     # any change in the source: a new key
    sig = nvrtc.kernel_signatures(first)["twice"]
    assert sig.param_sizes == (8, 4)


def test_headers_are_pasted_once():
    src = nvrtc.family_source("conv")
    assert not any(line.strip().startswith("#include") for line in src.splitlines())
    assert src.count("#define REDUCE_THREADS") == 1      # common.cuh, reached through gemm.cuh too


def test_every_compiled_kernel_is_launched_by_some_case(compiled):
    """So the GPU tests, which run every case against numpy, exercise every kernel."""
    _, sigs = compiled
    launched = {l.kernel for c in all_cases() for l in c.decl.cuda_launches(c.attrs, c.ins, c.outs)}
    assert set(sigs) - launched == set()
