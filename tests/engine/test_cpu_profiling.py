from engine.backends.cpu import CpuBackend, EmulatedLink
from engine.cpu_profiling import measure_cpu_profile
from engine.profile import signature
from engine.profiling import measure_link
from planner.policy import unlimited_program
from zoo import small


def test_link_fit_recovers_the_emulated_rates():
    link = EmulatedLink(h2d_bytes_per_s=1e9, d2h_bytes_per_s=0.5e9, duplex_bytes_per_s=1.2e9, latency_s=1e-4)
    backend = CpuBackend(link)
    try:
        m = measure_link(backend, sizes=(2**14, 2**18, 2**20), repeats=2)
    finally:
        backend.close()
    # loose bounds (a busy machine slows the emulation down); the fit must still see the rates'
    # order of magnitude and which way is faster
    assert 0.33e9 < m.h2d_bytes_per_s < 1.5e9
    assert 0.16e9 < m.d2h_bytes_per_s < 0.75e9
    assert m.h2d_bytes_per_s > 1.2 * m.d2h_bytes_per_s
    assert 0.4e9 < m.duplex_bytes_per_s < 2e9
    assert m.latency_s >= 1e-4 * 0.5


def test_profile_has_a_time_for_every_node():
    g = small.lstm(batch=4, steps=2, features=4, hidden=8, layers=1, classes=3)
    p = measure_cpu_profile(g, unlimited_program(g), iterations=1)
    assert all(signature(g, n.id) in p.ops for n in g.nodes)
    assert (p.node_seconds(g) > 0).all() and p.dispatch_s >= 0
