import numpy as np

from engine.backends.cpu import CpuBackend, EmulatedLink
from engine.cpu_profiling import measure_cpu_profile
from engine.profile import signature
from engine.profiling import measure_link
from planner.policy import unlimited_program
from zoo import small


class ClockedCopies:
    """A backend whose copies take latency + bytes / rate on a virtual clock (both ways queued
    together: latency + their bytes at the duplex rate), so the fit is checked without timing
    anything: a busy machine cannot move it (issue 39)."""

    def __init__(self, h2d, d2h, duplex, latency, stalls=None):
        self.h2d, self.d2h, self.duplex, self.latency = h2d, d2h, duplex, latency
        self.now, self.pending, self.timings = 0.0, [], None
        self.stalls = dict(stalls or {})       # copy number -> seconds a busy machine adds to it
        self.copies = 0

    def allocate_arena(self, nbytes):
        self.arena = np.zeros(nbytes, dtype=np.uint8)

    def host_buffer(self, shape, dtype):
        return np.zeros(shape, dtype)

    def view(self, offset, shape, dtype):
        return self.arena[offset:offset + int(np.prod(shape))].view(dtype).reshape(shape)

    def copy_h2d(self, stream, dst, src):
        self.pending.append((stream, src.nbytes, self.h2d))

    def copy_d2h(self, stream, dst, src):
        self.pending.append((stream, src.nbytes, self.d2h))

    def synchronize(self):
        if len(self.pending) > 1:
            span = self.latency + sum(n for _, n, _ in self.pending) / self.duplex
            ends = [self.now + span] * len(self.pending)
        else:
            ends = [self.now + self.latency + n / rate + self.stalls.get(self.copies, 0.0)
                    for _, n, rate in self.pending]
        self.copies += len(self.pending)
        if self.timings is not None:
            self.timings += [(s, n, self.now, end) for (s, n, _), end in zip(self.pending, ends)]
        self.now, self.pending = max(ends, default=self.now), []


def test_link_fit_recovers_the_rates_of_its_timings():
    m = measure_link(ClockedCopies(1e9, 0.5e9, 1.2e9, 1e-4), sizes=(2**14, 2**18, 2**20), repeats=2)
    assert np.allclose([m.h2d_bytes_per_s, m.d2h_bytes_per_s, m.duplex_bytes_per_s, m.latency_s],
                       [1e9, 0.5e9, 1.2e9, 1e-4], rtol=1e-6)


def test_link_fit_is_not_tilted_by_a_stalled_copy():
    """A busy machine stalls some copies; the fastest repeat of each size is what the link
    does. Fitting every repeat, one 50 ms stall of the first small copy made the H2D rate
    negative (issue 39: test_link_measurement_on_the_cpu_backend_gives_a_usable_link failed
    under load)."""
    m = measure_link(ClockedCopies(1e9, 0.5e9, 1.2e9, 1e-4, stalls={0: 0.05}), sizes=(2**14, 2**18, 2**20),
                     repeats=2)
    assert np.allclose([m.h2d_bytes_per_s, m.d2h_bytes_per_s, m.duplex_bytes_per_s, m.latency_s],
                       [1e9, 0.5e9, 1.2e9, 1e-4], rtol=1e-6)


def test_link_fit_of_copies_that_do_not_grow_with_size_is_still_a_rate():
    """Every repeat of the small copies stalled: no line through them has a positive slope, so
    the biggest copy's bytes over its time is the rate (never a negative or infinite one)."""
    stalled = {k: 0.05 for k in (0, 6)}               # the 2**14-byte H2D copy of both repeats
    m = measure_link(ClockedCopies(1e9, 0.5e9, 1.2e9, 1e-4, stalls=stalled), sizes=(2**14, 2**18, 2**20),
                     repeats=2)
    assert np.isclose(m.h2d_bytes_per_s, 2**20 / (1e-4 + 2**20 / 1e9)) and m.latency_s >= 0
    assert np.isclose(m.d2h_bytes_per_s, 0.5e9)


def test_link_measurement_on_the_cpu_backend_gives_a_usable_link():
    """The real emulation, timed: only what no load can break (the figures are a benchmark's)."""
    backend = CpuBackend(EmulatedLink(h2d_bytes_per_s=1e9, d2h_bytes_per_s=0.5e9, duplex_bytes_per_s=1.2e9,
                                      latency_s=1e-4))
    try:
        m = measure_link(backend, sizes=(2**14, 2**18, 2**20), repeats=2)
    finally:
        backend.close()
    rates = [m.h2d_bytes_per_s, m.d2h_bytes_per_s, m.duplex_bytes_per_s]
    assert all(np.isfinite(r) and r > 0 for r in rates) and m.latency_s >= 0


def test_profile_has_a_time_for_every_node():
    g = small.lstm(batch=4, steps=2, features=4, hidden=8, layers=1, classes=3)
    p = measure_cpu_profile(g, unlimited_program(g), iterations=1)
    assert all(signature(g, n.id) in p.ops for n in g.nodes)
    assert (p.node_seconds(g) > 0).all() and p.dispatch_s >= 0
