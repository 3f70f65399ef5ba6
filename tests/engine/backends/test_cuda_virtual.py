"""The CUDA backend's virtual-addressing arena (paper 001's ``va``) against the fake driver,
whose chunk handles are real memory files mapped where cuMemMap is told (fake_driver.py)."""
import numpy as np
import pytest

import zoo
from engine.backends.cuda import CudaBackend, CudaVirtualMemoryError
from engine.backends.detect import detect_gpu
from engine.executor import ProgramExecutor
from engine.liveness import peak_bytes
from engine.program import SWAP_IN
from engine.training import Trainer
from planner.facts import GraphFacts
from planner.policy import plan_with, unlimited_program
from planner.verify import verify
from tests.ops import cuda_emulator
from zoo import small

from . import fake_driver
from .test_cpu_virtual import on_scattered_chunks

G = 64 * 1024      # the fake device's allocation granularity in these tests (a real one: 2 MiB)


@pytest.fixture
def fake(monkeypatch):
    api = fake_driver.install(monkeypatch)
    api.vmm.granularity = G
    return api


def test_a_view_over_two_non_adjacent_chunks_is_one_device_range(fake):
    be = CudaBackend()
    try:
        be.allocate_virtual_arena(4 * G + 4096, 4096, np.array([[0, 3 * G, G], [G, 0, G]]), 2 * G)
        vm = fake.vmm
        assert len(vm.mapped) == 2 and vm.created == 2 and len(vm.reserved) == 1
        n = 2 * G // 4
        x = be.view(0, (n,), np.float32)
        assert np.isnan(be.read(x)).all()                              # poisoned through the mappings
        be.write(x, np.arange(n, dtype=np.float32))
        by_address = {a: h for a, (_, h) in vm.mapped.items()}
        first, second = (vm.chunk(by_address[a]).view(np.float32) for a in sorted(by_address))
        assert np.array_equal(first, np.arange(n // 2, dtype=np.float32))
        assert np.array_equal(second, np.arange(n // 2, n, dtype=np.float32))
        chunk = be._chunks.handle
        assert chunk(3, G) == by_address[min(by_address)] and chunk(0, G) == by_address[max(by_address)]
        assert be._scratch_bytes == 4096 and be._scratch not in by_address
    finally:
        be.close()
    assert vm.released == vm.created and not vm.mapped and not vm.reserved


def test_chunk_handles_are_cached_across_arenas_and_released_on_close(fake):
    be = CudaBackend()
    try:
        be.allocate_virtual_arena(2 * G, 0, np.array([[0, 0, G], [2 * G, G, G]]), 3 * G)
        assert fake.vmm.created == 2
        be.allocate_virtual_arena(3 * G, 0, np.array([[G, 0, G], [4 * G, G, 2 * G]]), 6 * G)
        assert fake.vmm.created == 3 and fake.vmm.released == 0      # chunks 0, 1 reused; 2 is new
        assert len(fake.vmm.reserved) == 1                            # the first range was given back
        be.allocate_arena(4096)                                       # a plain arena unmaps the virtual one
        assert not fake.vmm.mapped and not fake.vmm.reserved
    finally:
        be.close()
    assert fake.vmm.released == 3


def test_rows_off_the_granularity_are_refused_in_one_line(fake):
    be = CudaBackend()
    try:
        with pytest.raises(CudaVirtualMemoryError, match="granularity"):
            be.allocate_virtual_arena(G, 0, np.array([[0, 0, G // 2]]), G)
    finally:
        be.close()


@pytest.mark.skipif(not cuda_emulator.available(), reason="g++ is needed to build the host emulation")
def test_fake_training_on_a_page_table_is_bit_identical(monkeypatch):
    """Our CUDA kernels (run on the host) on tensors whose chunks are scattered through the
    fake's mappings: the same parameters as the unlimited plan on a plain arena."""
    api = fake_driver.install(monkeypatch, emulate=True)
    api.vmm.granularity = G
    g = small.lstm(batch=2, steps=3, features=4, hidden=4, layers=1, classes=3)
    budget = max(peak_bytes(g) // 4, GraphFacts(g).smallest_budget)
    program = plan_with("swapadvisor", g, budget)
    assert program.count(SWAP_IN) > 0
    moved = on_scattered_chunks(program, G)
    verify(moved, g)

    ref, state = _train(g, unlimited_program(g)), _train(g, moved)
    assert all(np.array_equal(a, state[t]) for t, a in ref.items())


def _train(g, program, iterations: int = 3):
    be = CudaBackend()
    try:
        tr = Trainer(g, seed=0, runner=ProgramExecutor(program, g, be))
        for _ in range(iterations):
            tr.step()
        return tr.state
    finally:
        be.close()


GPUS, WHY = detect_gpu()
GPU_GRANULARITY = 2 << 20       # the H100's and H200's minimum physical chunk (cuMemGetAllocationGranularity)


@pytest.mark.gpu
@pytest.mark.skipif(GPUS == 0, reason=f"no GPU ({WHY})")
@pytest.mark.parametrize("family", ["rnn", "wresnet"])
def test_training_on_a_scattered_page_table_is_bit_identical_on_the_gpu(family):
    """The virtual arena on a real GPU: cuMemCreate chunks mapped out of order into a reserved range
    (multi-chunk objects span non-adjacent chunks), a quarter of the peak, our kernels: the same
    parameters as the unlimited plan on a plain arena."""
    g = zoo.tiny(family)
    budget = max(peak_bytes(g) // 4, GraphFacts(g).smallest_budget)
    moved = on_scattered_chunks(plan_with("swapadvisor", g, budget), GPU_GRANULARITY)
    verify(moved, g)
    ref, state = _train(g, unlimited_program(g)), _train(g, moved)
    bad = [g.tensors[t].name for t, a in ref.items() if not np.array_equal(a, state[t])]
    assert not bad, f"{family}: {bad[:3]} differ"
