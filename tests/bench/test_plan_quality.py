"""bench.plan_quality end to end on one Table 1 model: both tables, the machine line, --save."""
import datetime

import pytest

from bench import plan_quality


def test_one_model_saved(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert plan_quality.main(["--models", "inception-4", "--save"]) == 0
    out = capsys.readouterr().out
    assert "Lower bounds on one iteration" in out and "x bound" in out and "held swap-ins" in out
    for plan in ("ideal", "odswap", "swapadvisor", "odswap, MXNet order", "swapadvisor, MXNet order"):
        assert f"Inception-4  {plan}" in out
    saved = (tmp_path / "bench" / "results" / f"plan_quality_{datetime.date.today().isoformat()}.txt").read_text()
    assert "cores:" in saved.splitlines()[1] and "5.618" in saved       # the machine; inception-4's bound


def test_an_unknown_model_is_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        plan_quality.main(["--models", "alexnet"])
    assert e.value.code == 2 and "unknown model alexnet" in capsys.readouterr().err
