"""engine/files.py: every way an input file can fail is one line naming it and what would work."""
import io
import json
import zipfile

import numpy as np
import pytest

from engine.errors import EngineError
from engine.files import read_json, read_npz


class Refused(EngineError):
    pass


def _refused(read, path, match):
    with pytest.raises(Refused, match=match) as e:
        read(str(path), "input file", Refused, "a file --save wrote")
    assert "\n" not in str(e.value) and str(path) in str(e.value)
    return str(e.value)


def test_json_is_read_or_refused_in_one_line(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"a": [1, 2]}))
    assert read_json(str(good), "input file", Refused, "a file --save wrote") == {"a": [1, 2]}
    assert _refused(read_json, tmp_path / "missing.json", "does not exist").startswith("input file '")
    assert _refused(read_json, tmp_path, "is a directory").endswith("give a file --save wrote")
    binary = tmp_path / "binary.json"
    binary.write_bytes(bytes(range(256)))
    _refused(read_json, binary, r"is not text \(binary data\); give a file --save wrote")
    broken = tmp_path / "broken.json"
    broken.write_text('{"a": ')
    _refused(read_json, broken, r"is not valid JSON \(.*\); give a file --save wrote")


def test_npz_is_read_or_refused_in_one_line(tmp_path):
    good = tmp_path / "good.npz"
    np.savez(good, w=np.arange(3.0))
    np.testing.assert_array_equal(read_npz(str(good), "input file", Refused, "x")["w"], np.arange(3.0))
    _refused(read_npz, tmp_path / "missing.npz", "does not exist")
    _refused(read_npz, tmp_path, "is a directory")
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    _refused(read_npz, empty, "it is an empty file; give a file --save wrote")
    text = tmp_path / "text.npz"
    text.write_text("iteration,loss\n")
    _refused(read_npz, text, r"it is not an npz \(zip\) file")
    cut = tmp_path / "cut.npz"
    cut.write_bytes(good.read_bytes()[:len(good.read_bytes()) // 2])
    _refused(read_npz, cut, "truncated or corrupt")


def test_an_object_array_is_refused_without_unpickling(tmp_path):
    path = tmp_path / "objects.npz"
    with zipfile.ZipFile(path, "w") as z:
        buf = io.BytesIO()
        np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        z.writestr("x.npy", buf.getvalue())
    _refused(read_npz, path, "cannot be read")
