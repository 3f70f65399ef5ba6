from engine.backends.detect import detect_gpu


def test_detection_answers_without_raising():
    count, reason = detect_gpu()
    assert count >= 0
    assert (count > 0) == (reason == "")
    assert detect_gpu() == (count, reason)     # cached: the driver is asked once


def _fake_driver_with_one_device(monkeypatch):
    from cuda.bindings import driver
    ok = driver.CUresult.CUDA_SUCCESS
    monkeypatch.setattr(driver, "cuInit", lambda flags: (ok,))
    monkeypatch.setattr(driver, "cuDeviceGetCount", lambda: (ok, 1))


def _installed_cuda_core(monkeypatch, version):
    from importlib import metadata
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: version if name == "cuda-core" else real(name))


def test_a_device_with_a_supported_cuda_core_is_found(monkeypatch):
    _fake_driver_with_one_device(monkeypatch)
    _installed_cuda_core(monkeypatch, "1.2.2")
    assert detect_gpu.__wrapped__() == (1, "")


def test_an_unsupported_cuda_core_is_a_reason_not_a_device(monkeypatch):
    # cuda.core 0.x kept its API in cuda.core.experimental: the backend would fail on its first call.
    _fake_driver_with_one_device(monkeypatch)
    _installed_cuda_core(monkeypatch, "0.3.2")
    count, reason = detect_gpu.__wrapped__()
    assert count == 0
    assert reason == ("cuda.core 0.3.2 is installed, and the cuda backend needs cuda.core 1.x "
                      "(pip install 'cuda-python>=13,<14')")
