"""bench.profile_ops: a measured profile's kernel time by operator, with the cost model's rates."""
from pathlib import Path

import pytest

import zoo
from bench import profile_ops
from engine.profile import Profile, signature

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "bench/profiles/profile_wresnet-50-1_b16_s112.json"


def test_every_timed_node_is_counted_once_under_its_operator():
    g, profile = zoo.build("wresnet-50-1", batch=16, size=112), Profile.load(str(PROFILE))
    rows = profile_ops.by_operator(g, profile.ops)
    timed = [n for n in g.nodes if signature(g, n.id) in profile.ops]
    assert sum(r[0] for r in rows.values()) == len(timed)
    assert sum(r[1] for r in rows.values()) == pytest.approx(sum(profile.ops[signature(g, n.id)] for n in timed))
    assert rows["conv2d"][2] > 0 and rows["relu"][2] < rows["conv2d"][2]      # FLOPs from the ops' cost model


def test_main_prints_the_largest_operators_beside_an_older_profile(capsys):
    assert profile_ops.main(["--model", "wresnet-50-1", "--batch", "16", "--size", "112", "--profile", str(PROFILE),
                             "--before", str(PROFILE), "--top", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("kernels ") and "(before: " in out[1]
    assert len(out) == 2 + 2 + 3 and "ms before" in out[2]


def test_a_broken_profile_is_refused_in_one_line(tmp_path, capsys):
    bad = tmp_path / "p.json"
    bad.write_text('{"format": "swapengine.profile/1", "ops": 3}')
    assert profile_ops.main(["--model", "wresnet-50-1", "--batch", "16", "--size", "112", "--profile", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err
