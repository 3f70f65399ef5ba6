"""engine/files.py: every way an input file can fail is one line naming it and what would work."""
import io
import json
import zipfile

import numpy as np
import pytest

from engine import files
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


# ---------------------------------------------------------------------- issue 39, defect 2: hostile files
def test_a_json_nesting_bomb_is_one_line(tmp_path):
    bomb = tmp_path / "bomb.json"
    bomb.write_text("[" * 200_000 + "]" * 200_000)
    _refused(read_json, bomb, r"is nested too deeply .*; give a file --save wrote")


def _npy_header(shape, dtype="<f4") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def test_an_npz_member_claiming_more_than_it_holds_is_refused_before_allocating(tmp_path):
    liar = tmp_path / "liar.npz"
    with zipfile.ZipFile(liar, "w") as z:          # 2**40 float32s (4 TiB) claimed, 16 bytes held
        z.writestr("t/w.npy", _npy_header((2**40,)) + bytes(16))
    _refused(read_npz, liar, r"member 't/w' claims 4\.0 TiB in its header and the archive holds 16 B")


def test_npz_members_larger_than_memory_are_refused_before_reading(tmp_path, monkeypatch):
    path = tmp_path / "big.npz"
    np.savez(path, w=np.zeros(1024, np.float32))
    monkeypatch.setattr(files, "physical_memory", lambda: 1000)
    _refused(read_npz, path, r"arrays hold 4\.0 KiB, more than this machine's memory \(1000 B\)")


def test_a_zip_bomb_member_is_refused_without_decompressing_it(tmp_path, monkeypatch):
    bomb = tmp_path / "bomb.npz"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as z:
        n = 16 << 20                                # 64 MiB of zeros compress ~1000:1
        with z.open("t/w.npy", "w", force_zip64=True) as f:
            f.write(_npy_header((n,)))
            zeros = bytes(1 << 20)
            for _ in range(4 * n // len(zeros)):
                f.write(zeros)
    assert bomb.stat().st_size < 1 << 20
    read = []
    real_read = zipfile.ZipExtFile.read

    def counting(self, n=-1):
        data = real_read(self, n)
        read.append(len(data))
        return data
    monkeypatch.setattr(zipfile.ZipExtFile, "read", counting)
    _refused(read_npz, bomb, r"member 't/w' would decompress to 64\.\d MiB from .* KiB \(over 64 times\)")
    assert sum(read) < 1 << 20                      # its header only, not 64 MiB


def test_npz_members_that_are_not_arrays_are_refused(tmp_path):
    path = tmp_path / "extra.npz"
    np.savez(path, w=np.arange(3.0))
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("notes.txt", b"x" * 100)
    _refused(read_npz, path, r"member 'notes.txt' is not an array")
