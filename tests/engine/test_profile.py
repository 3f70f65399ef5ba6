import json

import numpy as np
import pytest

from engine.profile import Link, Profile, ProfileError, analytic_profile, signature
from zoo import small


def test_analytic_profile_follows_cost():
    g = small.lstm(batch=8, steps=2, features=16, hidden=32, layers=1, classes=4)
    secs = analytic_profile("v100").node_seconds(g)
    assert secs.shape == (len(g.nodes),) and (secs > 0).all()
    fc = [n.id for n in g.nodes if n.op == "fully_connected"]
    relu_like = [n.id for n in g.nodes if n.op == "sigmoid"]
    assert secs[fc].max() > secs[relu_like].min()
    with pytest.raises(ProfileError, match="no analytic profile for device 'tpu'"):
        analytic_profile("tpu")


def test_measured_times_by_signature_and_json(tmp_path):
    g = small.lstm(batch=2, steps=2, features=4, hidden=4, layers=1, classes=3)
    ops = {signature(g, n.id): 1e-3 * (n.id + 1) for n in g.nodes}
    p = Profile("dev", Link(1e9, 1e9, 1.5e9, 1e-5), None, ops, 2e-6)
    path = tmp_path / "p.json"
    p.save(str(path))
    q = Profile.load(str(path))
    assert np.allclose(q.node_seconds(g), p.node_seconds(g)) and q.dispatch_s == 2e-6
    missing = Profile("dev", p.link)
    with pytest.raises(ProfileError, match="has no time for node"):
        missing.node_seconds(g)


def test_bad_profiles(tmp_path):
    with pytest.raises(ProfileError, match="does not exist"):
        Profile.load(str(tmp_path / "none.json"))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ProfileError, match="not valid JSON"):
        Profile.load(str(tmp_path / "bad.json"))
    d = analytic_profile("v100").to_dict()
    d["link"]["h2d_bytes_per_s"] = -1
    with pytest.raises(ProfileError, match="non-positive bandwidth"):
        Profile.from_dict(json.loads(json.dumps(d)))
