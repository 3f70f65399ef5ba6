import threading
import time

import numpy as np
import pytest

from engine.backends.cpu import POISON, CpuBackend, EmulatedLink
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT


@pytest.fixture
def backend():
    b = CpuBackend(EmulatedLink(h2d_bytes_per_s=100e6, d2h_bytes_per_s=100e6, duplex_bytes_per_s=120e6,
                                latency_s=0.0))
    yield b
    b.close()


def test_streams_run_in_order_and_events_order_streams(backend):
    log = []
    backend.streams[SWAP_IN].submit(lambda: (time.sleep(0.05), log.append("copy")))
    ev = backend.record(SWAP_IN)
    backend.wait(COMPUTE, ev)
    backend.streams[COMPUTE].submit(lambda: log.append("compute"))
    backend.synchronize()
    assert log == ["copy", "compute"]


def test_copies_take_bytes_over_rate_and_share_the_duplex_rate(backend):
    """Only lower bounds: the emulation paces each chunk to a deadline, so no load can make a
    copy faster than its link, while any load can make it slower (an upper bound here failed
    on a busy machine: issue 39). That both directions together share the duplex rate is the
    pacing's rule, checked by the lower bound for both at once (one chunk of slack)."""
    backend.allocate_arena(2 * 2**20)
    host = [backend.host_buffer((2**20,), np.uint8) for _ in range(2)]
    host[0][:] = 7
    dev = [backend.view(0, (2**20,), np.uint8), backend.view(2**20, (2**20,), np.uint8)]
    t0 = time.perf_counter()
    backend.copy_h2d(SWAP_IN, dev[0], host[0])
    backend.synchronize()
    one = time.perf_counter() - t0
    assert (dev[0] == 7).all()
    assert one >= 2**20 / 100e6 * (1 - 1e-3)
    t0 = time.perf_counter()
    backend.copy_h2d(SWAP_IN, dev[0], host[0])
    backend.copy_d2h(SWAP_OUT, host[1], dev[1])
    backend.synchronize()
    both = time.perf_counter() - t0
    # less one pacing chunk: the first direction's first chunk may be paced at its solo rate
    # before the other direction joins
    assert both >= 2 * 2**20 / 120e6 - EmulatedLink.chunk_s
    assert (host[1] == dev[1]).all()


def test_sanitizer_poisons_objects_before_they_are_written():
    """A racing reader with no edge to the copy reads between the poison and the data landing.
    That window is held open by events, not by sleeps (a reader that slept 0.03 s into a copy
    of 0.1 s latency raced the copy on a busy machine: issue 39)."""
    b = CpuBackend(EmulatedLink(latency_s=0.0), sanitize=True, jitter_s=0.0)
    poisoned, read = threading.Event(), threading.Event()
    transfer = b.link.transfer

    def transfer_after_the_read(*args):        # the copy stream, after poisoning, before the data
        poisoned.set()
        assert read.wait(timeout=60)
        transfer(*args)

    b.link.transfer = transfer_after_the_read
    try:
        b.allocate_arena(1024)
        assert (b.arena == POISON).all()
        dst = b.view(0, (4,), np.float32)
        dst[:] = 1.0                         # stale data of a previous tenant
        host = np.arange(4, dtype=np.float32)
        seen = []
        b.copy_h2d(SWAP_IN, dst, host)       # poisons, then the data lands
        b.streams[COMPUTE].submit(lambda: (poisoned.wait(timeout=60), seen.append(dst.copy()), read.set()))
        b.synchronize()
        assert np.isnan(seen[0]).all()       # NaN, never the stale 1.0
        assert np.array_equal(dst, host)
    finally:
        b.close()


def test_an_error_on_a_stream_is_raised_by_synchronize_and_nothing_hangs(backend):
    backend.streams[COMPUTE].submit(lambda: 1 / 0)
    ev = backend.record(COMPUTE)
    backend.wait(SWAP_IN, ev)
    with pytest.raises(ZeroDivisionError):
        backend.synchronize()
    backend.synchronize()       # cleared: the backend is usable again


def test_the_error_that_happened_first_is_raised_not_the_first_stream_s(backend):
    """The swap-in stream fails first; the compute stream's failure is its follow-on."""
    class Root(Exception):
        pass
    backend.streams[SWAP_IN].submit(lambda: (_ for _ in ()).throw(Root("the link")))
    failed = backend.record(SWAP_IN)
    backend.wait(COMPUTE, failed)
    backend.streams[COMPUTE].submit(lambda: 1 / 0)
    with pytest.raises(Root):
        backend.synchronize()
    backend.synchronize()       # the follow-on was cleared with it


def test_stream_threads_and_the_reference_use_one_blas_thread_and_give_it_back():
    from threadpoolctl import threadpool_limits

    from engine.blas_threads import blas_threads
    from engine.training import ReferenceRunner, Trainer
    from zoo import small

    with threadpool_limits(limits=4, user_api="blas"):
        before = blas_threads()
        b = CpuBackend()
        seen = []
        b.streams[COMPUTE].submit(lambda: seen.append(blas_threads()))
        b.synchronize()
        b.close()
        assert seen == [[1] * len(before)] and blas_threads() == before == [4] * len(before)

        import engine.reference as reference
        g = small.lstm(batch=2, steps=2, features=4, hidden=4, layers=1, classes=3)
        execute, inside = reference.execute, []
        reference.execute = lambda *a, **k: (inside.append(blas_threads()), execute(*a, **k))[1]
        try:
            Trainer(g, runner=ReferenceRunner(g)).step()
        finally:
            reference.execute = execute
        assert inside[-1] == [1] * len(before) and blas_threads() == before      # [-1]: the data may use it too


def test_a_timed_replay_queues_the_iteration_whole_with_its_events(monkeypatch):
    """While timing, a captured iteration is captured again with its timing events and queued whole
    (the streams run it back to back, as an untimed replay does), and every instruction is timed."""
    from engine.backends.cpu import CpuDevice
    from engine.executor import ProgramExecutor
    from engine.training import Trainer
    from planner.policy import unlimited_program
    from zoo import small

    g = small.lstm(batch=2, steps=2, features=4, hidden=4, layers=1, classes=3)
    program = unlimited_program(g)
    b = CpuBackend()
    try:
        ex = ProgramExecutor(program, g, b)
        assert ex.graph is not None
        tr = Trainer(g, seed=0, runner=ex)
        tr.step()
        captures, capture = [], CpuDevice.capture
        monkeypatch.setattr(CpuDevice, "capture", lambda self, issue: (captures.append(1), capture(self, issue))[1])
        b.timings = []
        tr.step()
        timed = [nid for stream, nid, t0, t1 in b.timings if stream == COMPUTE]
        b.timings = None
    finally:
        b.close()
    assert captures == [1]
    assert sorted(timed) == sorted(ins.target for ins in program.instrs if ins.kind == COMPUTE)
