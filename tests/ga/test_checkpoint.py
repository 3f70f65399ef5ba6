import json
import math

import pytest

from ga.checkpoint import FORMAT, SearchCheckpointError, check_identity, load, save


def test_save_and_load_round_trip_atomically(tmp_path):
    path = tmp_path / "sub" / "ga.json"
    state = {"identity": {"seed": 1}, "generation": 3, "population": [{"time": None}]}
    save(str(path), state)
    assert load(str(path)) == {"format": FORMAT, **state}
    save(str(path), {**state, "generation": 4})
    assert load(str(path))["generation"] == 4
    assert sorted(p.name for p in path.parent.iterdir()) == ["ga.json"]  # no temporary left


def test_a_failed_save_leaves_the_old_checkpoint(tmp_path):
    path = tmp_path / "ga.json"
    save(str(path), {"generation": 1})
    with pytest.raises(ValueError):
        save(str(path), {"generation": math.inf})     # not JSON: refused before the rename
    assert load(str(path))["generation"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["ga.json"]


def test_load_refuses_what_is_not_a_checkpoint(tmp_path):
    with pytest.raises(SearchCheckpointError, match="does not exist"):
        load(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(SearchCheckpointError, match="not valid JSON"):
        load(str(bad))
    bad.write_text(json.dumps({"format": "other"}))
    with pytest.raises(SearchCheckpointError, match="not a search checkpoint"):
        load(str(bad))


def test_identity_mismatch_names_the_field():
    state = {"identity": {"graph": "g", "seed": 1}}
    check_identity(state, {"graph": "g", "seed": 1}, "p")
    with pytest.raises(SearchCheckpointError, match="its seed is 1, this search's is 2"):
        check_identity(state, {"graph": "g", "seed": 2}, "p")


def test_a_checkpoint_is_an_ordinary_file_not_private(tmp_path):
    import os
    from ga import checkpoint
    path = tmp_path / "s.json"
    checkpoint.save(str(path), {"x": 1})
    umask = os.umask(0)
    os.umask(umask)
    assert (path.stat().st_mode & 0o777) == (0o666 & ~umask)
