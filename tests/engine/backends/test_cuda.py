"""The CUDA backend (engine/backends/cuda.py).

Without a GPU: the module imports no CUDA, refuses to start with detect_gpu's reason before
making any CUDA object, and its own logic (memory, pinned buffers, copies, argument
binding, scratch, timing, capture plumbing, the executor on top) runs against a fake
driver in host memory (fake_driver.py). With a GPU (marked ``gpu``): streams, events, pinned With a GPU (marked ``gpu``): streams, events, pinned
copies, timings, graph capture and replay, the link measurement, and training under a
quarter of the unlimited peak giving parameters bit-identical to the unlimited run, both
on the GPU."""
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import ops
import zoo
from engine.backends import cuda as cuda_backend
from engine.backends.cuda import CudaBackend, CudaUnavailable, DeviceArray
from engine.backends.detect import detect_gpu
from engine.backends.pinned import PINNED_CHUNK
from engine.executor import ProgramExecutor
from engine.liveness import peak_bytes
from engine.profiling import measure_link
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT
from engine.training import Trainer
from planner.facts import GraphFacts
from planner.policy import plan_with, unlimited_program
from planner.verify import verify
from tests.ops import cuda_emulator
from tests.ops.cuda_cases import case
from zoo import small

from . import fake_driver

GPUS, WHY = detect_gpu()
needs_gpu = pytest.mark.skipif(GPUS == 0, reason=f"no GPU ({WHY})")
ROOT = Path(__file__).resolve().parents[3]


# ---------------------------------------------------------------------- no GPU needed

def test_importing_the_backend_imports_no_cuda():
    code = "import sys, engine.backends.cuda; print(any(m.startswith('cuda') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def test_no_device_is_refused_before_any_cuda_object(monkeypatch):
    monkeypatch.setattr(cuda_backend, "detect_gpu", lambda: (0, "libcuda not loadable"))
    monkeypatch.setattr(cuda_backend, "_driver", lambda: pytest.fail("the driver was touched"))
    with pytest.raises(CudaUnavailable, match="no CUDA device: libcuda not loadable"):
        CudaBackend()


def test_a_missing_device_number_is_refused(monkeypatch):
    monkeypatch.setattr(cuda_backend, "detect_gpu", lambda: (1, ""))
    with pytest.raises(CudaUnavailable, match="no CUDA device 3: 1 found"):
        CudaBackend(device=3)


def test_device_arrays_slice_like_1d_arrays():
    a = DeviceArray(1000, (10,), np.dtype(np.float32))
    assert a.nbytes == 40 and a.size == 10
    b = a[2:5]
    assert (b.ptr, b.shape, b.dtype) == (1008, (3,), np.float32)
    assert a[:100].shape == (10,) and a[7:3].shape == (0,)
    with pytest.raises(TypeError):
        a[::2]
    with pytest.raises(TypeError):
        DeviceArray(0, (2, 3), np.dtype(np.float32))[:1]


# ---------------------------------------------------------------------- the backend's logic, on a fake CUDA

@pytest.fixture
def fake(monkeypatch):
    return fake_driver.install(monkeypatch)


@pytest.fixture
def fake_backend(fake):
    be = CudaBackend()
    yield be
    be.close()


def _views(be, c, scratch=None):
    """Views for c's inputs then outputs, 256-byte aligned, in a fresh arena that ends with
    ``scratch`` bytes of operator scratch (default: what c's operator declares)."""
    if scratch is None:
        scratch = ops.get(c.op).workspace(c.attrs, c.ins, c.outs)
    sizes = [-(-int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize // 256) * 256 + 256 for t in (*c.ins, *c.outs)]
    be.allocate_arena(sum(sizes) + scratch, scratch)
    offsets = np.cumsum([0] + sizes[:-1])
    views = [be.view(int(o), t.shape, t.dtype) for o, t in zip(offsets, (*c.ins, *c.outs))]
    return views[:len(c.ins)], views[len(c.ins):]


def test_fake_arena_views_and_synchronous_copies(fake_backend):
    be = fake_backend
    be.allocate_arena(4096)
    v = be.view(256, (3, 4), np.float32)
    assert np.isnan(be.read(v)).all()                      # poisoned
    be.write(v, np.arange(12, dtype=np.float32).reshape(3, 4))
    np.testing.assert_array_equal(be.read(v), np.arange(12).reshape(3, 4))
    with pytest.raises(ValueError, match="outside the arena"):
        be.view(4096 - 8, (3,), np.float32)
    with pytest.raises(ValueError, match="cannot write 5 elements"):
        be.write(v, np.zeros(5, np.float32))


def test_fake_pinned_host_buffers(fake_backend):
    be = fake_backend
    a = be.host_buffer((10, 3), np.float32)
    b = be.host_buffer((7,), np.int64)
    big = be.host_buffer((PINNED_CHUNK // 8 + 1,), np.float64)     # a chunk of its own
    pinned = be._pinned.contains
    for x in (a, b, big):
        assert x.ctypes.data % 256 == 0 and pinned(x.ctypes.data, x.nbytes)
        assert (x.reshape(-1).view(np.uint8) == 0xFF).all()
    assert pinned(a[1:].ctypes.data, a[1:].nbytes)
    assert not pinned(np.zeros(4).ctypes.data, 32)
    assert be.host_buffer((0, 3), np.float32).shape == (0, 3)


def test_fake_async_copies_need_pinned_memory(fake_backend):
    be = fake_backend
    be.allocate_arena(1 << 16)
    dev = be.view(0, (100,), np.float32)
    host_in, host_out = be.host_buffer((100,), np.float32), be.host_buffer((100,), np.float32)
    host_in[:] = np.arange(100)
    be.copy_h2d(SWAP_IN, dev, host_in)
    be.copy_d2h(SWAP_OUT, host_out, dev)
    be.synchronize()
    np.testing.assert_array_equal(host_out, host_in)
    with pytest.raises(ValueError, match="pinned"):
        be.copy_h2d(SWAP_IN, dev, np.zeros(100, np.float32))
    with pytest.raises(ValueError, match="400 contiguous host bytes"):
        be.copy_d2h(SWAP_OUT, be.host_buffer((100,), np.float64)[::2], dev)


def test_fake_launch_binds_tensors_scalars_and_scratch(fake, fake_backend):
    be = fake_backend
    c = case("conv2d_grad_weight", [(16, 32, 16, 16), (16, 32, 16, 16)], padding=1, kernel_hw=(3, 3))
    ins, outs = _views(be, c)
    node = SimpleNamespace(op=c.op, attrs=c.attrs, id=7)
    be.launch(COMPUTE, node, ins, outs)
    be.launch(COMPUTE, node, ins, outs)
    assert len(be._prepared) == 1                          # prepared once, launched twice
    (gemm, _, _, gemm_args), (reduce, _, _, reduce_args) = fake.launches[:2]
    assert (gemm, reduce) == ("conv2d_grad_weight_gemm_s", "conv2d_splitk_reduce")
    need = ops.get(c.op).workspace(c.attrs, c.ins, c.outs)
    scratch = be._arena + be._arena_bytes - need           # the arena's tail
    assert need > 0 and scratch >= outs[-1].ptr + outs[-1].nbytes
    assert gemm_args[:3] == (scratch, ins[0].ptr, ins[1].ptr)
    assert reduce_args[:2] == (outs[0].ptr, scratch)
    assert all(isinstance(a, np.int32) for a in gemm_args[3:])         # marshalled as 4-byte ints
    assert len(fake.launches) == 4


def test_fake_timings_are_seconds_after_the_start(fake_backend):
    be = fake_backend
    c = case("relu", [(100,)])
    ins, outs = _views(be, c)
    host = be.host_buffer((100,), np.float32)
    be.timings = []
    be.launch(COMPUTE, SimpleNamespace(op="relu", attrs={}, id=3), ins, outs)
    be.copy_d2h(SWAP_OUT, host, outs[0])
    assert be.timings == []                                # handed over at synchronize
    be.synchronize()
    (s0, what0, a0, b0), (s1, what1, a1, b1) = be.timings
    assert (s0, what0, s1, what1) == (COMPUTE, 3, SWAP_OUT, 400)
    assert 0 < a0 < b0 <= a1 < b1
    be.timings = None
    be.copy_d2h(SWAP_OUT, host, outs[0])
    be.synchronize()
    assert be.timings is None


def _round_trip(be, host_in, host_out, x, y):
    """host_in -> x (swap-in stream), y = 2x (compute), y -> host_out (swap-out stream)."""
    be.copy_h2d(SWAP_IN, x, host_in)
    be.wait(COMPUTE, be.record(SWAP_IN))
    be.launch(COMPUTE, _scale_node(), [x], [y])
    be.wait(SWAP_OUT, be.record(COMPUTE))
    be.copy_d2h(SWAP_OUT, host_out, y)


def _round_trip_buffers(be, n: int, arena: int):
    """A fresh arena of ``arena`` bytes with float32 views x at 0 and y at 4096 bytes, and
    pinned host buffers host_in, host_out: what ``_round_trip`` moves between."""
    be.allocate_arena(arena)
    x, y = be.view(0, (n,), np.float32), be.view(4096, (n,), np.float32)
    return x, y, be.host_buffer((n,), np.float32), be.host_buffer((n,), np.float32)


def _scale_node(nid=0):
    return SimpleNamespace(op="scale", attrs={"factor": 2.0}, id=nid)


def test_fake_capture_records_and_replay_runs(fake, fake_backend):
    be = fake_backend
    x, y, host_in, host_out = _round_trip_buffers(be, 100, 1 << 16)
    graph = be.capture(lambda: _round_trip(be, host_in, host_out, x, y))
    assert graph is not None and fake.launches == []       # captured, not run
    for k in range(2):
        host_in[:] = k                                     # host buffers are read at replay
        be.replay(graph)
        be.synchronize()
        np.testing.assert_array_equal(be.read(x), k)
    assert [l[0] for l in fake.launches] == ["scale_fwd", "scale_fwd"]
    be.timings = []                                        # timing: issued eagerly, each piece timed
    be.replay(graph)
    be.synchronize()
    assert sorted(s for s, *_ in be.timings) == [COMPUTE, SWAP_IN, SWAP_OUT]
    be.timings = None
    be.allocate_arena(1 << 16)
    with pytest.raises(cuda_backend.CudaError, match="arena"):
        be.replay(graph)


def test_fake_scratch_beyond_the_arenas_reservation_is_refused_before_capture(fake, fake_backend):
    """Scratch is the arena's tail, never a separate allocation: a launch needing more than
    the arena reserves fails with one line, and in capture's first pass, not mid-capture."""
    be = fake_backend
    c = case("fully_connected_grad_weight", [(8192, 24), (8192, 40)], has_bias=True)
    need = ops.get(c.op).workspace(c.attrs, c.ins, c.outs)
    ins, outs = _views(be, c, scratch=need - 256)
    node = SimpleNamespace(op=c.op, attrs=c.attrs, id=1)
    allocations = set(fake.memory)
    with pytest.raises(cuda_backend.CudaError, match=f"needs {need} bytes of operator scratch but the arena "
                                                     f"reserves {need - 256}"):
        be.capture(lambda: be.launch(COMPUTE, node, ins, outs))
    assert fake.capture is None and set(fake.memory) == allocations
    ins, outs = _views(be, c)
    graph = be.capture(lambda: be.launch(COMPUTE, node, ins, outs))
    be.replay(graph)
    assert [l[0] for l in fake.launches] == ["gemm_tn_s", "gemm_splitk_reduce", "sum_rows"]


def test_fake_failed_capture_falls_back_to_eager_issue(fake, fake_backend):
    be = fake_backend
    be.allocate_arena(1 << 16)
    x, y = be.view(0, (100,), np.float32), be.view(1024, (100,), np.float32)
    fake.fail_capture = True
    old = be.streams
    with pytest.warns(UserWarning, match="capture failed"):
        assert be.capture(lambda: be.launch(COMPUTE, _scale_node(), [x], [y])) is None
    assert be.streams is not old and fake.capture is None
    be.launch(COMPUTE, _scale_node(), [x], [y])
    assert [l[0] for l in fake.launches] == ["scale_fwd"]


def test_fake_capture_reraises_operator_errors(fake_backend):
    be = fake_backend
    be.allocate_arena(1 << 16)
    x = be.view(0, (4,), np.float16)
    with pytest.raises(ops.OpError, match="float16"):
        be.capture(lambda: be.launch(COMPUTE, SimpleNamespace(op="relu", attrs={}, id=0), [x], [x]))


def test_fake_executor_issues_every_kernel_once_per_iteration(fake, fake_backend):
    """The executor, unchanged, on this backend: capture (with its sizing pass), pinned host
    buffers for every swap, and one replay per step running every node's kernels."""
    g = zoo.tiny("rnn")
    budget = GraphFacts(g).smallest_budget
    program = plan_with("swapadvisor", g, budget)
    ex = ProgramExecutor(program, g, fake_backend)
    assert ex.graph is not None and fake.launches == []
    per_iteration = sum(len(ops.get(g.nodes[i.target].op).cuda_launches(
        g.nodes[i.target].attrs, [g.tensors[t] for t in g.nodes[i.target].inputs],
        [g.tensors[t] for t in g.nodes[i.target].outputs])) for i in program.instrs if i.kind == COMPUTE)
    tr = Trainer(g, seed=0, runner=ex)
    tr.step()
    tr.step()
    assert len(fake.launches) == 2 * per_iteration


def test_fake_link_measurement(fake):
    be = CudaBackend()
    try:
        link = measure_link(be, sizes=(2**12, 2**16, 2**20))
    finally:
        be.close()
    assert link.h2d_bytes_per_s == pytest.approx(1e9, rel=0.01)       # the fake link's rate
    assert link.latency_s == pytest.approx(5e-6, rel=0.5)


ITERATIONS = 3


def _train(g, program, **backend_options):
    """(state, losses) after ITERATIONS steps of ``program`` on a fresh CudaBackend."""
    be = CudaBackend(**backend_options)
    try:
        tr = Trainer(g, seed=0, runner=ProgramExecutor(program, g, be))
        losses = [tr.step() for _ in range(ITERATIONS)]
        return tr.state, losses
    finally:
        be.close()


@pytest.mark.skipif(not cuda_emulator.available(), reason="g++ is needed to build the host emulation")
def test_fake_training_with_host_emulated_kernels_is_bit_identical_at_a_quarter_budget(monkeypatch):
    """The whole path but the GPU: our CUDA kernels (run on the host), this backend (on the
    fake CUDA), the executor, capture and replay, swaps at a quarter of the peak."""
    fake_driver.install(monkeypatch, emulate=True)
    g = small.lstm(batch=2, steps=3, features=4, hidden=4, layers=1, classes=3)
    budget = max(peak_bytes(g) // 4, GraphFacts(g).smallest_budget)
    program = plan_with("swapadvisor", g, budget)
    assert program.count(SWAP_IN) > 0
    (ref, _), (state, _) = _train(g, unlimited_program(g)), _train(g, program)
    assert all(np.array_equal(a, state[t]) for t, a in ref.items())
    cpu = Trainer(g, seed=0)
    for _ in range(ITERATIONS):
        cpu.step()
    for t, a in cpu.state.items():
        np.testing.assert_allclose(ref[t], a, rtol=1e-5, atol=1e-6)


def test_fake_sanitizer_delays_and_poisons_before_each_instruction(fake):
    be = CudaBackend(sanitize=True, seed=3, jitter_s=(1e-4, 2e-4, 0.0))
    try:
        x, y, host_in, host_out = _round_trip_buffers(be, 100, 1 << 16)
        host_in[:] = 1
        be.write(y, np.full(100, 7, np.float32))
        assert be.capture(lambda: None) is None              # fresh delays every iteration
        be.copy_h2d(SWAP_IN, x, host_in)
        be.launch(COMPUTE, _scale_node(), [x], [y])
        be.launch(COMPUTE, SimpleNamespace(op="relu", attrs={}, id=1), [y], [y])   # in place: not poisoned
        be.copy_d2h(SWAP_OUT, host_out, y)
        be.synchronize()
    finally:
        be.close()
    delays = [int(l[3][0]) for l in fake.launches if l[0] == "sanitizer_delay"]
    assert len(delays) == 3 and all(0 <= d <= 2e5 for d in delays)    # none on swap-out (jitter 0)
    assert [l[0] for l in fake.launches if l[0] != "sanitizer_delay"] == ["scale_fwd", "relu_fwd"]
    # the fresh arena, then the swap-in's and scale's destinations
    assert fake.memsets == [(x.ptr, 1 << 16), (x.ptr, 400), (y.ptr, 400)]


@pytest.mark.skipif(not cuda_emulator.available(), reason="g++ is needed to build the host emulation")
def test_fake_sanitized_training_with_host_emulated_kernels_is_bit_identical(monkeypatch):
    fake_driver.install(monkeypatch, emulate=True)
    g = small.lstm(batch=2, steps=3, features=4, hidden=4, layers=1, classes=3)
    budget = max(peak_bytes(g) // 4, GraphFacts(g).smallest_budget)
    ref, _ = _train(g, unlimited_program(g))
    state, _ = _train(g, plan_with("swapadvisor", g, budget), sanitize=True, seed=5)
    assert all(np.array_equal(a, state[t]) for t, a in ref.items())


# ---------------------------------------------------------------------- GPU

@pytest.fixture
def backend():
    be = CudaBackend()
    yield be
    be.close()


@pytest.mark.gpu
@needs_gpu
def test_streams_events_and_pinned_copies(backend):
    be = backend
    x, y, host_in, host_out = _round_trip_buffers(be, 1000, 1 << 20)
    assert np.isnan(be.read(x)).all()                      # a fresh arena is poisoned
    host_in[:] = np.arange(1000, dtype=np.float32)
    _round_trip(be, host_in, host_out, x, y)
    be.synchronize()
    np.testing.assert_array_equal(host_out, 2 * host_in)
    be.write(x, np.ones(1000, np.float32))
    np.testing.assert_array_equal(be.read(x), 1)
    with pytest.raises(ValueError, match="pinned"):
        be.copy_h2d(SWAP_IN, x, np.zeros(1000, np.float32))
    with pytest.raises(ValueError, match="outside the arena"):
        be.view((1 << 20) - 8, (4,), np.float32)


@pytest.mark.gpu
@needs_gpu
def test_capture_and_replay_read_host_buffers_at_replay(backend):
    be = backend
    x, y, host_in, host_out = _round_trip_buffers(be, 1000, 1 << 20)
    graph = be.capture(lambda: _round_trip(be, host_in, host_out, x, y))
    assert graph is not None
    for k in range(3):
        host_in[:] = k + np.arange(1000, dtype=np.float32)
        be.replay(graph)
        be.synchronize()
        np.testing.assert_array_equal(host_out, 2 * host_in)
    be.timings = []                                        # timing replays issue eagerly
    be.replay(graph)
    be.synchronize()
    kinds = sorted(s for s, *_ in be.timings)
    assert kinds == [COMPUTE, SWAP_IN, SWAP_OUT]
    assert all(t1 >= t0 for *_, t0, t1 in be.timings)
    be.timings = None


@pytest.mark.gpu
@needs_gpu
def test_link_measurement(backend):
    link = measure_link(backend, sizes=(2**16, 2**20, 2**24))
    assert link.h2d_bytes_per_s > 2e9 and link.d2h_bytes_per_s > 2e9
    assert link.duplex_bytes_per_s >= 0.9 * max(link.h2d_bytes_per_s, link.d2h_bytes_per_s)


FAMILIES = ["wresnet", "inception", "nasnet", "rnn", "brnn"]


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("family", FAMILIES)
def test_quarter_budget_training_is_bit_identical_on_the_gpu(family):
    g = zoo.tiny(family)
    budget = peak_bytes(g) // 4
    assert budget >= GraphFacts(g).smallest_budget, family
    ref_state, ref_losses = _train(g, unlimited_program(g))
    # The first loss agrees with the numpy reference to fp32 rounding. Later ones need not:
    # tiny models have batch-norm over 2 values, whose outputs cancel exactly in residual
    # sums, so a relu's mask can flip on rounding (seen for wresnet in the host emulation).
    cpu = Trainer(g, seed=0)
    np.testing.assert_allclose(ref_losses[0], cpu.step(), rtol=1e-4)
    for policy, graphs in (("swapadvisor", True), ("odswap", True), ("swapadvisor", False)):
        program = plan_with(policy, g, budget)
        verify(program, g, budget)
        state, losses = _train(g, program, graphs=graphs)
        bad = [g.tensors[t].name for t, a in ref_state.items() if not np.array_equal(a, state[t])]
        assert not bad, f"{family} {policy} (graphs {graphs}) at {budget} bytes: {bad[:3]} differ"
        assert losses == ref_losses


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("family", ["rnn", "wresnet"])
def test_sanitized_quarter_budget_training_is_bit_identical_on_the_gpu(family):
    """Random delays of up to 200 us before each instruction, destinations poisoned."""
    g = zoo.tiny(family)
    budget = peak_bytes(g) // 4
    ref_state, ref_losses = _train(g, unlimited_program(g))
    state, losses = _train(g, plan_with("swapadvisor", g, budget), sanitize=True, seed=1, jitter_s=2e-4)
    bad = [g.tensors[t].name for t, a in ref_state.items() if not np.array_equal(a, state[t])]
    assert not bad and losses == ref_losses, f"{family}: {bad[:3]} differ"


@pytest.mark.gpu
@needs_gpu
def test_cuda_sanitizer_turns_a_missing_edge_into_a_wrong_answer():
    """Without its edges to swap-ins, a compute runs while its input is still poisoned or
    arriving (swap-ins held back up to 2 ms each): the run must not match the reference."""
    g = zoo.tiny("rnn")
    budget = peak_bytes(g) // 4
    ref_state, _ = _train(g, unlimited_program(g))
    broken = plan_with("swapadvisor", g, budget)
    for ins in broken.instrs:
        if ins.kind == COMPUTE:
            ins.deps = [d for d in ins.deps if broken.instrs[d].kind != SWAP_IN]
    state, _ = _train(g, broken, sanitize=True, seed=2, jitter_s=(0.0, 2e-3, 0.0))
    assert any(not np.array_equal(a, state[t]) for t, a in ref_state.items())


def test_fake_an_arena_the_gpu_cannot_hold_is_refused_in_one_line(fake):
    """Out of device memory is the user's to fix (a smaller --memory): an EngineError, one line."""
    from engine.errors import EngineError
    fake.device_bytes = 1 << 30
    be = CudaBackend()
    try:
        with pytest.raises(cuda_backend.CudaOutOfMemory, match=r"an arena of 2\.0 GiB does not fit in the free "
                                                                r"memory of Fake GPU: plan for less \(--memory\)") as e:
            be.allocate_arena(2 << 30)
        assert isinstance(e.value, EngineError) and "\n" not in str(e.value)
        be.allocate_arena(1 << 20)                        # usable afterwards
        assert np.isnan(be.read(be.view(0, (4,), np.float32))).all()
    finally:
        be.close()
