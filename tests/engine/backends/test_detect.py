from engine.backends.detect import detect_gpu


def test_detection_answers_without_raising():
    count, reason = detect_gpu()
    assert count >= 0
    assert (count > 0) == (reason == "")
    assert detect_gpu() == (count, reason)     # cached: the driver is asked once
