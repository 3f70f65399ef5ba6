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


# ---------------------------------------------------------------------- issue 39's harness (bench/hostile_inputs.py)
def _read_in_child(reader: str, path) -> str:
    """``reader`` (read_json or read_npz) of ``path`` in a child process limited to 2 GiB and a
    minute: what it raised, in one line, or 'read' (a hang or a memory blow-up fails the test)."""
    import os
    import subprocess
    import sys
    code = ("import resource, sys\nresource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
            "from engine.errors import EngineError\nfrom engine.files import read_json, read_npz\n"
            f"try:\n    {reader}(sys.argv[1], 'input file', EngineError, 'a file --save wrote')\n"
            "    print('read')\nexcept EngineError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == 0, done.stderr[-500:]
    return done.stdout.strip()


@pytest.mark.parametrize("reader", ["read_json", "read_npz"])
def test_a_named_pipe_no_process_writes_is_not_waited_on(tmp_path, reader):
    """open() of a FIFO without a writer waited forever: --load-plan, --resume, --config, --data,
    --profile FIFO hung the run."""
    import os
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    said = _read_in_child(reader, fifo)
    wanted = "is not valid JSON" if reader == "read_json" else "is a pipe; give a file --save wrote"
    assert said.startswith(f"input file '{fifo}'") and wanted in said, said


def test_a_device_is_refused_without_reading_it():
    """--load-plan /dev/zero or --config /dev/zero read until the memory ran out (MemoryError)."""
    assert _read_in_child("read_json", "/dev/zero") == ("input file '/dev/zero' is a device, not a file; give a file "
                                                   "--save wrote")


def test_json_from_a_pipe_with_a_writer_is_read(tmp_path):
    """A pipe is still an input (--config <(...)): read until its writer closes it."""
    import os
    import threading
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def write():
        with open(fifo, "w") as f:
            f.write('{"a": 1}')
    writer = threading.Thread(target=write)
    writer.start()
    try:
        import time
        time.sleep(0.2)                 # the writer waits in open() for this reader
        assert read_json(str(fifo), "input file", Refused, "x") == {"a": 1}
    finally:
        writer.join(timeout=10)
