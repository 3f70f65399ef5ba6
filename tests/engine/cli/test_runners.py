"""The command line's backend choice (engine/backend_registry.py) and runners
(engine/library/runners.py): auto, cpu and cuda, the flags only one backend honours, and a whole
run on the cuda backend over the fake CUDA of tests/engine/backends/fake_driver.py, with our
kernels emulated on the host."""
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine import backend_registry
from engine.backends import detect
from engine.profile import Profile
from engine.train import main
from tests.ops import cuda_emulator

from tests.engine.backends import fake_driver

ROOT = Path(__file__).resolve().parents[3]
TINY = ["--model", "small-lstm", "--batch", "2", "--size", "2", "--quiet", "--search-seconds", "0"]
GPUS, WHY = detect.detect_gpu()


def _refuse_cuda_backends(monkeypatch):
    refuse = lambda *a, **k: pytest.fail("a CudaBackend was made")  # noqa: E731
    cuda = backend_registry.REGISTRY["cuda"]
    monkeypatch.setitem(backend_registry.REGISTRY, "cuda", dataclasses.replace(cuda, create=refuse))


@pytest.fixture
def no_gpu(monkeypatch):
    """detect_gpu finds nothing, and making a CudaBackend fails the test."""
    monkeypatch.setattr(detect, "detect_gpu", lambda: (0, "libcuda not loadable"))
    _refuse_cuda_backends(monkeypatch)


@pytest.fixture
def one_gpu(monkeypatch):
    """detect_gpu finds one device (nothing else is faked: these runs must stop before using it)."""
    monkeypatch.setattr(detect, "detect_gpu", lambda: (1, ""))
    _refuse_cuda_backends(monkeypatch)


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("engine.train: ") and "\n" not in err and "Traceback" not in err, err
    return err


def test_importing_the_command_line_imports_no_cuda():
    code = "import sys, engine.train; print(any(m.startswith('cuda') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def test_auto_without_a_gpu_runs_on_cpu_and_says_why(no_gpu, tmp_path, capsys):
    report = tmp_path / "r.json"
    assert main(TINY + ["--policy", "ideal", "--iterations", "1", "--profile", "v100", "--json", str(report),
                        "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("engine: no GPU found (libcuda not loadable); running on the cpu backend "
                                   "with an emulated 2 GB/s link")
    assert "backend cpu, emulated 2 GB/s link\n" in out and "not built yet" not in out
    r = json.loads(report.read_text())
    assert (r["backend"], r["emulated_link_gbps"]) == ("cpu", 2.0)


def test_backend_cpu_never_asks_the_driver(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(detect, "detect_gpu", lambda: pytest.fail("detect_gpu was called"))
    assert main(TINY + ["--backend", "cpu", "--link-gbps", "4", "--policy", "ideal", "--iterations", "1",
                        "--profile", "v100", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "running on the cpu backend with an emulated 4 GB/s link" in out.splitlines()[0]


def test_backend_cuda_without_a_gpu_is_one_line_and_status_2(no_gpu, capsys):
    assert main(["--backend", "cuda"]) == 2
    err = _one_line_error(capsys)
    assert "no GPU found (libcuda not loadable)" in err and "use --backend cpu" in err


@pytest.mark.parametrize("backend", ["cuda", "auto"])
@pytest.mark.parametrize("flags,message", [
    (["--link-gbps", "4"], "--link-gbps sets the cpu backend's emulated link.*use --backend cpu$"),
    (["--device", "1"], "--device 1: 1 CUDA device found, numbered from 0$"),
])
def test_flags_the_cuda_backend_refuses(one_gpu, backend, flags, message, capsys):
    assert main(TINY + ["--backend", backend] + flags) == 2
    import re
    assert re.search(message, _one_line_error(capsys))


def test_simulate_only_chooses_no_backend(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(detect, "detect_gpu", lambda: pytest.fail("detect_gpu was called"))
    report = tmp_path / "r.json"
    assert main(TINY + ["--simulate-only", "--profile", "v100", "--json", str(report), "--out", str(tmp_path)]) == 0
    assert "running on" not in capsys.readouterr().out
    assert json.loads(report.read_text())["backend"] is None


def test_auto_with_a_gpu_measures_the_profile_on_it(monkeypatch, tmp_path, capsys):
    """The plumbing only (kernels are logged, not run: the loss is meaningless)."""
    fake_driver.install_detected(monkeypatch)
    calls = []
    from engine import cuda_profiling
    real = cuda_profiling.measure_cuda_profile

    def spy(g, ideal, seed, data=None, device=0):
        calls.append((seed, data, device))
        return real(g, ideal, seed, iterations=1, data=data, device=device)
    monkeypatch.setattr(cuda_profiling, "measure_cuda_profile", spy)
    prof = tmp_path / "p.json"
    assert main(TINY + ["--policy", "ideal", "--iterations", "1", "--no-check", "--seed", "3",
                        "--save-profile", str(prof), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "engine: 1 CUDA device found; running on the cuda backend, device 0"
    assert "profiling operators on CUDA device 0" in out and "backend cuda (Fake GPU, device 0)" in out
    (seed, data, device), = calls
    assert seed == 3 and data is not None and device == 0
    profile = Profile.load(str(prof))
    assert profile.device == "cuda:Fake GPU" and profile.ops


@pytest.mark.skipif(not cuda_emulator.available(), reason="g++ is needed to build the host emulation")
def test_a_whole_run_on_the_cuda_backend_with_host_emulated_kernels(monkeypatch, tmp_path, capsys):
    """Planning, the cuda backend on the fake CUDA with our kernels run on the host and the
    sanitizer on, swaps under the default budget, and the check against the unlimited run
    on the same backend."""
    fake = fake_driver.install_detected(monkeypatch, emulate=True)
    report = tmp_path / "r.json"
    assert main(TINY + ["--backend", "cuda", "--profile", "v100", "--iterations", "2", "--measure-iterations", "1",
                        "--policy", "ideal,swapadvisor", "--sanitize", "--json", str(report), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "engine: --backend cuda given; running on the cuda backend, device 0"
    assert "backend cuda (Fake GPU, device 0)" in out
    assert "parameters identical to the unlimited run: yes (bit for bit)" in out
    assert any(name == "sanitizer_delay" for name, *_ in fake.launches)
    r = json.loads(report.read_text())
    assert (r["backend"], r["device_name"], r["identical"]) == ("cuda", "Fake GPU", True)
    assert r["policies"][1]["h2d_bytes"] > 0                 # it did swap


@pytest.mark.gpu
@pytest.mark.skipif(GPUS == 0, reason=f"no GPU ({WHY})")
def test_auto_runs_on_the_gpu_and_matches_the_unlimited_run(tmp_path, capsys):
    report = tmp_path / "r.json"
    assert main(TINY + ["--iterations", "3", "--measure-iterations", "1", "--policy", "ideal,odswap,swapadvisor",
                        "--json", str(report), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "running on the cuda backend" in out.splitlines()[0]
    assert "parameters identical to the unlimited run: yes (bit for bit)" in out
    assert json.loads(report.read_text())["backend"] == "cuda"
