"""Training checkpoints on disk: an npz of named arrays plus a JSON header, never pickled.

Writing is atomic and durable: a temporary file beside the target, flushed and fsynced, then
renamed over it (and the directory fsynced), so a checkpoint is either the old one or the
new one, whatever kills the process. A temporary file left by a process that was killed
mid-write (SIGKILL cannot be caught) is removed when the next run that writes the same path
starts, and by every save. A target that is not a regular file (a device, a pipe), or names a
descriptor (/dev/stdout), is written through instead of replaced; a symlink's file is
replaced and the link kept.

Reading validates everything before anything is trusted: the file is a zip archive (npz),
the header is a JSON object of our format, and every array is a plain numeric array.
Each failure is a ``CheckpointError`` whose message is one line.
"""
from __future__ import annotations

import errno
import glob
import json
import os
import stat
from typing import BinaryIO, Callable

import numpy as np

from .errors import EngineError
from .files import parse_json, read_npz

FORMAT = "swapengine.checkpoint/1"


class CheckpointError(EngineError, ValueError):
    pass


def _tmp_prefix(path: str) -> str:
    """Temporaries sit beside the file a symlink names, so the rename replaces that file and
    keeps the link (renaming over the link would leave the linked file stale)."""
    return f"{os.path.realpath(path)}.tmp-"


def remove_stale_temporaries(path: str) -> None:
    """Temporaries of ``path`` left by processes that no longer run (killed mid-write): a run
    that writes ``path`` calls this at its start (engine/cli/preflight), each save again."""
    for tmp in glob.glob(glob.escape(_tmp_prefix(path)) + "*"):
        pid = tmp[len(_tmp_prefix(path)):]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        except PermissionError:      # alive, someone else's
            pass


def write(path: str, header: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write ``header`` (JSON) and ``arrays`` to ``path`` atomically and durably."""
    write_atomically(path, lambda f: np.savez(f, __header__=np.array(json.dumps({"format": FORMAT, **header})),
                                              **{f"t/{name}": a for name, a in arrays.items()}))


def _names_a_descriptor(path: str) -> bool:
    """Whether ``path`` is, or links to, an open descriptor (/dev/stdout, /dev/fd/3,
    /proc/self/fd/1): perhaps a regular file the shell opened, whose replacement would leave
    the run's other output in an unlinked file. (/dev/shm/r.json is an ordinary file.)"""
    p = os.path.abspath(path)
    for _ in range(40):                 # the kernel's own limit on a chain of links
        if p.startswith(("/proc/", "/dev/fd/")):
            return True
        if not os.path.islink(p):
            return False
        p = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p)))
    return False


def written_through(path: str) -> bool:
    """Whether ``path`` is written through rather than replaced: a device or pipe, or a name of
    an open descriptor (_names_a_descriptor)."""
    if _names_a_descriptor(path):
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:                     # not there yet: it will be a regular file
        return False


def _open_through(path: str) -> BinaryIO:
    """``path``, a device or pipe, opened for writing. Opened without blocking first: a pipe
    that no process reads is an OSError at once, where a plain open would wait for a reader
    forever (a run that hangs at its end); with a reader, writes block as usual. A regular
    file behind /dev/stdout is written from its end: it keeps what the run printed before
    (not O_APPEND, under which a zip's seek back to patch a header would write at the end)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as e:
        if e.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "a pipe that no process reads", path) from None
        raise
    os.set_blocking(fd, True)
    if stat.S_ISREG(os.fstat(fd).st_mode):
        os.lseek(fd, 0, os.SEEK_END)
    return open(fd, "wb")


def write_atomically(path: str, write_to: Callable[[BinaryIO], object]) -> None:
    """Call ``write_to`` on a temporary file beside ``path``, flush it to disk, rename it over
    ``path``: a reader sees the old file or the new one, never part of one, even after a kill
    or a power cut. Temporaries left by killed writers are removed. A ``path`` that exists and
    is not a regular file (a device such as /dev/null, a pipe), or names a descriptor
    (/dev/stdout), is written through, not replaced: a rename would put a regular file in its
    place. A symlink stays one: the file it names is replaced."""
    if written_through(path):
        with _open_through(path) as f:
            write_to(f)
        return
    path = os.path.realpath(path)       # a symlink stays one: the file it names is replaced
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    remove_stale_temporaries(path)
    tmp = f"{_tmp_prefix(path)}{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            write_to(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    try:                                # the rename itself survives a power cut
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    """(header, {tensor name: array}) of the checkpoint at ``path``; CheckpointError if it is
    missing, not an npz, truncated, or not ours."""
    members = read_npz(path, "checkpoint", CheckpointError, "the .npz file --checkpoint wrote")
    if "__header__" not in members:
        raise CheckpointError(f"'{path}' is not a swapengine checkpoint (an npz without a header)")
    header = parse_json(str(members["__header__"]), path, "checkpoint header of", CheckpointError,
                        "the .npz file --checkpoint wrote")
    arrays = {k[2:]: a for k, a in members.items() if k.startswith("t/")}
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        found = header.get("format") if isinstance(header, dict) else type(header).__name__
        raise CheckpointError(f"'{path}' is not a swapengine checkpoint (its header is {found!r:.40}, "
                              f"expected format '{FORMAT}')")
    bad = next((k for k, a in arrays.items() if a.dtype.kind not in "fiub"), None)
    if bad is not None:
        raise CheckpointError(f"checkpoint '{path}': tensor '{bad}' is not a numeric array")
    return header, arrays


def read_header(path: str) -> dict:
    """The validated header alone (the arrays are read too: a truncated file fails here, early)."""
    return read(path)[0]
