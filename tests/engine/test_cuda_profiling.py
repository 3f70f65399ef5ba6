"""Measuring a profile on the GPU (engine/cuda_profiling.py). Its plumbing runs here on the
fake CUDA of tests/engine/backends/fake_driver.py; on a GPU, bench/cuda_vs_torch.py uses it."""
import pytest

import zoo
from engine.cuda_profiling import measure_cuda_profile
from engine.profile import Profile, signature
from engine.program import COMPUTE
from planner.policy import unlimited_program
from tests.engine.backends import fake_driver


def test_profile_has_every_signature_a_link_and_a_dispatch_cost(monkeypatch):
    fake_driver.install(monkeypatch)
    g = zoo.tiny("rnn")
    ideal = unlimited_program(g)
    profile = measure_cuda_profile(g, ideal, iterations=2)
    assert profile.device == "cuda:Fake GPU"
    assert all(signature(g, i.target) in profile.ops for i in ideal.instrs if i.kind == COMPUTE)
    assert all(t > 0 for t in profile.ops.values())
    assert profile.link.h2d_bytes_per_s == pytest.approx(1e9, rel=0.01)
    assert 0 <= profile.dispatch_s < 0.5
    assert Profile.from_dict(profile.to_dict()).ops == profile.ops      # a valid profile file
