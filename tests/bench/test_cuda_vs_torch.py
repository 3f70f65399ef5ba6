"""bench/cuda_vs_torch.py, checked without a GPU.

Its PyTorch twin: for every zoo family, a few float64 training iterations of our numpy
reference and of PyTorch (autograd and torch.optim.SGD on the translated forward pass,
same parameters, same batches) give the same losses and parameters. In float64 rounding
stays near 1e-13, so any difference in an operator's forward or backward rule, in the SGD
update or in the translation shows up. (float32 is not used: some tiny CNNs are chaotic
over several SGD steps, so rounding alone makes float32 runs part; a batch norm over 2
values, for one, has a gradient that is zero in exact arithmetic and pure rounding noise
in either implementation.) Marked ``torch``: skipped where PyTorch is not importable (CI),
run by bench/gpu_session.sh on the GPU machine, whose image has it. PyTorch is never a
dependency of the engine.

Its timing of our engine: on the fake CUDA of tests/engine/backends/fake_driver.py, whose
copies move at 1 GB/s, the swap-copy rates it reports must be that rate, and main() must
print its three tables."""
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import bench.cuda_vs_torch as bench
import zoo
from bench.cuda_vs_torch import RandomData, TorchTwin, time_ours
from engine.ir import Kind
from engine.liveness import peak_bytes
from engine.program import SWAP_IN, SWAP_OUT
from engine.training import ReferenceRunner, Trainer
from planner.policy import plan_with
from tests.engine.backends import fake_driver

# Batches and images large enough that no batch norm normalises fewer than ~16 values.
FAMILIES = {"wresnet": dict(batch=8, size=64), "inception": dict(batch=8, size=139),
            "nasnet": dict(batch=8, size=64), "rnn": {}, "brnn": {}}
STEPS = 3


@pytest.mark.torch
@pytest.mark.parametrize("family", FAMILIES)
def test_pytorch_twin_trains_like_our_reference(family):
    torch = pytest.importorskip("torch")
    g = zoo.tiny(family, dtype="float64", **FAMILIES[family])
    data = RandomData(g)
    ours = Trainer(g, seed=0, runner=ReferenceRunner(g), data=data)
    twin = TorchTwin(g, torch, torch.device("cpu"))
    for i in range(STEPS):
        ours_loss, twin_loss = ours.step(), float(twin.step(data.batch(i)))
        assert ours_loss == pytest.approx(twin_loss, rel=1e-9), f"iteration {i}"
    state = ours.state
    trained = [t for t in twin.values if g.tensors[t].kind == Kind.PARAMETER]
    assert trained
    for t in trained:
        expected = twin.values[t].detach().numpy()
        scale = max(float(np.max(np.abs(expected))), 1e-12)
        assert np.max(np.abs(state[t] - expected)) <= 1e-9 * scale, g.tensors[t].name


def test_swap_copy_rates_are_the_copies_bytes_over_their_time(monkeypatch):
    fake_driver.install(monkeypatch)            # kernels only logged: the numbers are not checked
    g = zoo.build("rnn-1-1k", batch=8, size=3)
    program = plan_with("swapadvisor", g, peak_bytes(g) // 2)
    moved = [program.bytes_moved(g, kind) for kind in (SWAP_IN, SWAP_OUT)]
    assert all(n >= 1 << 20 for n in moved)   # copies the rate counts (>= 1 MiB each) exist
    seconds, _, rates = time_ours(g, program, RandomData(g), iterations=1, copy_rates=True)
    assert seconds > 0
    assert rates == pytest.approx([1e9, 1e9], rel=0.01)     # the fake link: 1 GB/s after 5 us


def test_the_benchmark_prints_its_three_tables(monkeypatch, capsys, tmp_path):
    """main() end to end on the fake CUDA, PyTorch's side stood in by a fixed time: the
    tables' plumbing, including the swap copies beside the link (both 1 GB/s here)."""
    fake_driver.install(monkeypatch)
    monkeypatch.setattr(bench, "detect_gpu", lambda: (1, ""))
    flags = SimpleNamespace(allow_tf32=True)
    fake_torch = SimpleNamespace(
        __version__="0.0-fake",
        backends=SimpleNamespace(cuda=SimpleNamespace(matmul=flags), cudnn=SimpleNamespace(allow_tf32=True)),
        cuda=SimpleNamespace(get_device_name=lambda: "Fake GPU", empty_cache=lambda: None),
        device=lambda name: SimpleNamespace(type=name))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(bench, "time_torch", lambda g, data, iterations, torch, device: (0.5, 1.0))
    monkeypatch.setattr(bench, "CONFIGS", {"rnn": ("rnn-1-1k", 8, 3)})
    saved = tmp_path / "profiles"
    saved.mkdir()
    assert bench.main(["--models", "rnn", "--iterations", "1", "--budget", "0.5,0.25",
                       "--save-profiles", str(saved)]) == 0
    out = capsys.readouterr().out
    assert not flags.allow_tf32 and not fake_torch.backends.cudnn.allow_tf32      # fp32 on PyTorch's side
    speed, swap, link = out.split("\n\n")[1:4]
    assert "rnn-1-1k" in speed and "500.0" in speed                            # PyTorch's 0.5 s
    of_peak = [float(l.split()[2]) for l in swap.splitlines()[3:]]      # 0.25 rises to the smallest budget
    assert "Under budgets" in swap and of_peak[0] == 0.5 and 0.25 <= of_peak[1] < 0.5
    for row in (l.split() for l in link.splitlines()[3:]):
        assert row[0] == "rnn-1-1k" and row[4] == "100%" and row[7] == "100%"    # swaps at the link's rate
    assert [p.name for p in saved.iterdir()] == ["profile_rnn-1-1k_b8_s3.json"]


def test_one_models_failure_keeps_the_others_figures(monkeypatch, capsys):
    fake_driver.install(monkeypatch)
    monkeypatch.setattr(bench, "detect_gpu", lambda: (1, ""))
    fake_torch = SimpleNamespace(
        __version__="0.0-fake", backends=SimpleNamespace(cuda=SimpleNamespace(matmul=SimpleNamespace()),
                                                         cudnn=SimpleNamespace()),
        cuda=SimpleNamespace(get_device_name=lambda: "Fake GPU", empty_cache=lambda: None),
        device=lambda name: SimpleNamespace(type=name))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(bench, "time_torch", lambda g, data, iterations, torch, device: (0.5, 1.0))
    monkeypatch.setattr(bench, "CONFIGS", {"rnn": ("rnn-1-1k", 8, 3), "wresnet": ("no-such-model", 8, 3)})
    assert bench.main(["--models", "wresnet,rnn", "--iterations", "1"]) == 1
    captured = capsys.readouterr()
    assert "wresnet: FAILED" in captured.err and "failed: wresnet" in captured.out
    assert "rnn-1-1k" in captured.out.split("\n\n")[1]
