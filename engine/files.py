"""Reading an input file, or saying in one line why not: the one ladder every JSON and npz
reader climbs (plans, profiles, checkpoints, search checkpoints).

Each reader names the file (``what``: "plan file"), the ``EngineError`` class it raises, and
what would work (``wants``: "a JSON file --save-plan wrote"); a missing file, a directory, an
unreadable one, binary data, bad JSON or a broken npz each becomes one line with the path.
Hostile files too: JSON nested deeper than the parser recurses, and npz members whose sizes
do not add up (a header claiming 4 TiB in a 1 KiB member, a member that decompresses over
``MAX_INFLATION`` times its stored size, arrays larger than this machine's memory) are refused
from the archive's directory and the arrays' headers, in exact integers, before anything is
allocated or decompressed. What the contents mean is the caller's to check.
"""
from __future__ import annotations

import errno
import json
import math
import os
import stat
import zipfile

import numpy as np

from .units import format_bytes

_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")     # a zip with members, an empty zip
MAX_INFLATION = 64          # a member may decompress to this many times its stored bytes...
SMALL_MEMBER = 1 << 20      # ...unless it is at most this big (a few zeros compress well)


def physical_memory() -> int | None:
    """This machine's memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def shown_path(path: str) -> str:
    """``path`` short enough for a one-line message: a hostile name may run to thousands of characters."""
    return path if len(path) <= 100 else f"{path[:50]}...{path[-40:]}"


def _refusal(e: OSError, path: str, what: str, wants: str) -> str:
    if e.errno == errno.ENAMETOOLONG:
        return (f"{what} '{shown_path(path)}': the name is too long for the file system "
                f"({len(path)} characters); give a shorter path")
    if isinstance(e, FileNotFoundError):
        return f"{what} '{path}' does not exist"
    if isinstance(e, IsADirectoryError):
        return f"{what} '{path}' is a directory; give {wants}"
    return f"{what} '{path}' cannot be read ({e.strerror or e})"


def _open_input(path: str, what: str, error: type[Exception], wants: str, pipes: bool) -> int:
    """A descriptor of the file at ``path``, opened without waiting: open() of a named pipe
    that no process writes waits forever, and a device such as /dev/zero never ends. A
    directory or a device is refused; a pipe too unless ``pipes`` (then, with no writer, it
    reads as empty at once)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise error(_refusal(e, path, what, wants)) from None
    mode = os.fstat(fd).st_mode
    kind = ("a directory" if stat.S_ISDIR(mode) else None if stat.S_ISREG(mode)
            else None if pipes and (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode))
            else "a pipe" if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else "a device, not a file")
    if kind:
        os.close(fd)
        raise error(f"{what} '{path}' is {kind}; give {wants}")
    os.set_blocking(fd, True)
    return fd


def parse_json(text: str, path: str, what: str, error: type[Exception], wants: str):
    """The JSON value of ``text`` (read from ``path``); ``error`` with one line if there is none."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{what} '{path}' is not valid JSON ({e}); give {wants}") from None
    except RecursionError:
        raise error(f"{what} '{path}' is nested too deeply (lists or objects within each other beyond "
                    f"what the reader follows); give {wants}") from None


def read_json(path: str, what: str, error: type[Exception], wants: str):
    """The JSON value in the file at ``path``; ``error`` with one line if there is none."""
    fd = _open_input(path, what, error, wants, pipes=True)
    try:
        with open(fd, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise error(_refusal(e, path, what, wants)) from None
    except UnicodeDecodeError:
        raise error(f"{what} '{path}' is not text (binary data); give {wants}") from None
    return parse_json(text, path, what, error, wants)


class _Refused(Exception):
    """A member whose declared sizes do not add up: the message says which and how."""


def _npy_data_bytes(z: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[int, int] | None:
    """(header bytes, data bytes) an npy member's header declares, exactly; None if the member
    is not an npy array. Reads the header alone (a few hundred bytes decompressed)."""
    fmt = np.lib.format
    with z.open(info) as f:
        try:
            version = fmt.read_magic(f)
        except ValueError:
            return None
        if version == (1, 0):
            shape, _, dtype = fmt.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, _, dtype = fmt.read_array_header_2_0(f)
        else:                                   # 3.0: the header in UTF-8
            shape, _, dtype = fmt._read_array_header(f, version)
        header = f.tell()
    if dtype.hasobject:
        raise _Refused(f"member '{info.filename[:-4]}' holds Python objects, which are never unpickled")
    return header, math.prod(int(n) for n in shape) * int(dtype.itemsize)


def member_refusal(info: zipfile.ZipInfo, file_bytes: int) -> str | None:
    """Why a zip member's directory entry is not to be trusted (more stored bytes than the file
    has; a decompressed size over MAX_INFLATION times the stored one: a zip bomb), or None.
    Decided from the directory alone, in exact integers, before anything is decompressed."""
    name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
    if info.compress_size > file_bytes:
        return (f"member '{name}' claims {format_bytes(info.compress_size)} stored in a file of "
                f"{format_bytes(file_bytes)}")
    if info.file_size > max(SMALL_MEMBER, MAX_INFLATION * info.compress_size):
        return (f"member '{name}' would decompress to {format_bytes(info.file_size)} from "
                f"{format_bytes(info.compress_size)} (over {MAX_INFLATION} times)")
    return None


def memory_refusal(total: int, what: str) -> str | None:
    """Why ``total`` bytes of ``what`` cannot be loaded here (more than this machine's memory), or None."""
    have = physical_memory()
    if have and total > have:
        return f"{what} hold {format_bytes(total)}, more than this machine's memory ({format_bytes(have)})"
    return None


def _check_members(z: zipfile.ZipFile, file_bytes: int) -> None:
    """_Refused naming the first member whose declared sizes do not add up."""
    total = 0
    for info in z.infolist():
        name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        why = member_refusal(info, file_bytes)
        if why:
            raise _Refused(why)
        declared = _npy_data_bytes(z, info)
        if declared is None:
            raise _Refused(f"member '{info.filename}' is not an array")
        header, data = declared
        if header + data != info.file_size:
            raise _Refused(f"member '{name}' claims {format_bytes(data)} in its header and the archive "
                           f"holds {format_bytes(max(info.file_size - header, 0))}")
        total += data
    why = memory_refusal(total, "its arrays")
    if why:
        raise _Refused(why)


def read_npz(path: str, what: str, error: type[Exception], wants: str) -> dict[str, np.ndarray]:
    """Every array of the npz file at ``path``, read now and never unpickled; ``error`` with
    one line if it is missing, not a zip, truncated, holds an object array or something that
    is not an array, or claims more bytes than it holds or than this machine has."""
    fd = _open_input(path, what, error, wants, pipes=False)      # a zip is read by seeking: a file
    try:
        with open(fd, "rb") as f:
            magic = f.read(4)
            file_bytes = os.fstat(f.fileno()).st_size
    except OSError as e:
        raise error(_refusal(e, path, what, wants)) from None
    if magic not in _ZIP_MAGIC:
        found = "an empty file" if not magic else "not an npz (zip) file"
        raise error(f"{what} '{path}' cannot be read: it is {found}; give {wants}")
    try:
        with zipfile.ZipFile(path) as z:
            _check_members(z, file_bytes)
    except _Refused as e:
        raise error(f"{what} '{path}' cannot be read: {e}; give {wants}") from None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise error(f"{what} '{path}' cannot be read (truncated or corrupt: {reason}); give {wants}") from None
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise error(f"{what} '{path}' cannot be read (truncated or corrupt: {reason}); give {wants}") from None
