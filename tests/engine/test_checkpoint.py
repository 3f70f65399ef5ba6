"""engine/checkpoint.py: atomic, durable writes that leave no temporaries, and one line for
every unreadable file."""
import io
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from engine import checkpoint
from engine.checkpoint import CheckpointError
from engine.training import Trainer
from zoo import small


def _tiny():
    return small.lstm(batch=2, steps=2, features=4, hidden=4, layers=1, classes=3)


def test_a_temporary_left_by_a_killed_writer_is_removed_by_the_next_save(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = str(tmp_path / "ck.npz")
    stale = tmp_path / f"ck.npz.tmp-{dead.pid}"
    stale.write_bytes(b"half a checkpoint")
    Trainer(_tiny()).save(path)
    assert not stale.exists() and os.listdir(tmp_path) == ["ck.npz"]


def test_a_failed_write_leaves_the_old_checkpoint_and_no_temporary(tmp_path, monkeypatch):
    path = str(tmp_path / "ck.npz")
    checkpoint.write(path, {"iteration": 1}, {"w": np.ones(3)})

    def broken(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(np, "savez", broken)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.write(path, {"iteration": 2}, {"w": np.zeros(3)})
    assert os.listdir(tmp_path) == ["ck.npz"] and checkpoint.read_header(path)["iteration"] == 1


def test_writes_are_fsynced_before_the_rename(tmp_path, monkeypatch):
    calls = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd)))
    monkeypatch.setattr(os, "replace", lambda a, b: (calls.append("replace"), real_replace(a, b)))
    checkpoint.write(str(tmp_path / "ck.npz"), {}, {"w": np.ones(2)})
    assert calls[:2] == ["fsync", "replace"]


def _zip_with_header(header) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, __header__=np.array(json.dumps(header)))
    return buf.getvalue()


@pytest.mark.parametrize("content,message", [
    (b"", "an empty file"),
    (b"iteration,loss\n1,2.0\n", "not an npz"),
    (None, "truncated or corrupt"),                  # a real checkpoint cut in half
    (_zip_with_header([1, 2]), "its header is 'list'"),
    (_zip_with_header({"format": "other/1"}), "its header is 'other/1'"),
])
def test_unreadable_checkpoints_are_one_line(tmp_path, content, message):
    path = tmp_path / "ck.npz"
    if content is None:
        Trainer(_tiny()).save(str(path))
        data = path.read_bytes()
        content = data[:len(data) // 2]
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=message) as e:
        Trainer(_tiny()).load(str(path))
    assert "\n" not in str(e.value) and "pickle" not in str(e.value)


def test_an_object_array_is_refused_without_unpickling(tmp_path):
    path = tmp_path / "ck.npz"
    with zipfile.ZipFile(path, "w") as z:
        buf = io.BytesIO()
        np.save(buf, np.array(json.dumps({"format": checkpoint.FORMAT})))
        z.writestr("__header__.npy", buf.getvalue())
        buf = io.BytesIO()
        np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        z.writestr("t/w.npy", buf.getvalue())
    with pytest.raises(CheckpointError, match="cannot be read"):
        checkpoint.read(str(path))


def test_a_dtype_mismatch_names_the_flag_that_fixes_it(tmp_path):
    path = str(tmp_path / "ck.npz")
    Trainer(small.lstm(batch=2, steps=2, features=4, hidden=4, layers=1, classes=3)).save(path)
    wide = small.lstm(batch=2, steps=2, features=4, hidden=4, layers=1, classes=3, dtype="float64")
    with pytest.raises(CheckpointError, match="holds float32 tensors, this run is float64; pass --dtype float32"):
        Trainer(wide).load(path)


def test_a_header_nested_too_deeply_is_one_line(tmp_path):
    path = tmp_path / "bomb.npz"
    np.savez(path, __header__=np.array("[" * 200_000 + "]" * 200_000))
    with pytest.raises(CheckpointError, match="checkpoint header of .* is nested too deeply") as e:
        checkpoint.read(str(path))
    assert "\n" not in str(e.value)


# ---------------------------------------------------------------------- issue 39, defect 4
def _fifo_with_reader(tmp_path):
    """A FIFO in tmp_path and a non-blocking read end, open first so a writer never waits."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    return fifo, os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)


def _drain(fd) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def test_a_target_that_is_not_a_regular_file_is_written_through_not_replaced(tmp_path):
    """--checkpoint, --search-checkpoint and --json to a device or a pipe (/dev/null as root was
    replaced by a regular file): the bytes go through it, the file stays what it was."""
    import stat

    fifo, reader = _fifo_with_reader(tmp_path)
    checkpoint.write_atomically(str(fifo), lambda f: f.write(b"the report\n"))
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert _drain(reader) == b"the report\n"
    assert sorted(os.listdir(tmp_path)) == ["pipe"]            # no temporary made or left


def test_a_regular_target_is_still_replaced_atomically(tmp_path, monkeypatch):
    path = tmp_path / "ck.npz"
    path.write_bytes(b"old")
    replaced = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (replaced.append(b), real_replace(a, b)))
    checkpoint.write_atomically(str(path), lambda f: f.write(b"new"))
    assert replaced == [str(path)] and path.read_bytes() == b"new"


def test_stale_temporaries_are_swept_but_not_a_live_writers(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = str(tmp_path / "ck.npz")
    stale = tmp_path / f"ck.npz.tmp-{dead.pid}"
    live = tmp_path / f"ck.npz.tmp-{os.getppid()}"            # a process that is running
    other = tmp_path / f"other.npz.tmp-{dead.pid}"             # another target's: not ours to sweep
    for p in (stale, live, other):
        p.write_bytes(b"half")
    checkpoint.remove_stale_temporaries(path)
    assert sorted(os.listdir(tmp_path)) == sorted([live.name, other.name])
