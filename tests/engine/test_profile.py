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
    with pytest.raises(ProfileError, match="link.h2d_bytes_per_s is -1.0; rates must be finite and at least 1 per second"):
        Profile.from_dict(json.loads(json.dumps(d)))


def _v100(**changes):
    d = json.loads(json.dumps(analytic_profile("v100").to_dict()))
    for path, value in changes.items():
        *keys, last = path.split("__")
        target = d
        for k in keys:
            target = target[k]
        if value is KeyError:
            del target[last]
        else:
            target[last] = value
    return d


@pytest.mark.parametrize("changes,message", [
    ({"link__h2d_bytes_per_s": float("nan")}, "link.h2d_bytes_per_s is nan"),      # hung the simulator
    ({"link__duplex_bytes_per_s": float("inf")}, "link.duplex_bytes_per_s is inf"),
    ({"link__latency_s": float("nan")}, "link.latency_s is nan"),
    ({"analytic__flops_per_s": 0}, "analytic.flops_per_s is 0.0"),                  # ZeroDivisionError
    ({"analytic__bytes_per_s": -2}, "analytic.bytes_per_s is -2.0"),
    ({"device": KeyError}, "missing 'device'"),                                     # KeyError
    ({"device": 7}, "'device' must be a non-empty string"),
    ({"link": [1, 2]}, "'link' must be an object"),
    ({"link__h2d_bytes_per_s": "fast"}, "must be a number"),
    ({"ops": {"conv": float("nan")}}, "ops\\['conv'\\] is nan"),
    ({"dispatch_s": 5}, "dispatch_s 5.0 is a second or more"),
])
def test_every_bad_profile_field_is_named_in_one_line(changes, message):
    with pytest.raises(ProfileError, match=message) as e:
        Profile.from_dict(_v100(**changes))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("changes,message", [
    ({"link__h2d_bytes_per_s": 1e-300}, r"link.h2d_bytes_per_s is 1e-300; rates must be finite and at least 1 per"),
    ({"analytic__flops_per_s": 1e-300}, r"analytic.flops_per_s is 1e-300; rates must be"),
    ({"link__latency_s": 1e300}, r"link.latency_s is 1e\+300; times must be from 0 to 3600 seconds"),
    ({"ops": {"conv": 1e308}}, r"ops\['conv'\] is 1e\+308; times must be from 0 to 3600 seconds"),
])
def test_a_profile_no_device_could_have_is_refused(changes, message):
    """Issue 39's harness: a link of 1e-300 bytes/s or a latency of 1e300 s was taken, and every
    simulated time in the report ran to 300 digits."""
    with pytest.raises(ProfileError, match=message) as e:
        Profile.from_dict(_v100(**changes))
    assert "\n" not in str(e.value)


def test_a_binary_profile_file_is_one_line(tmp_path):
    path = tmp_path / "p.json"
    path.write_bytes(bytes(range(256)))
    with pytest.raises(ProfileError, match="is not text"):
        Profile.load(str(path))
