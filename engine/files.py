"""Reading an input file, or saying in one line why not: the one ladder every JSON and npz
reader climbs (plans, profiles, checkpoints, search checkpoints).

Each reader names the file (``what``: "plan file"), the ``EngineError`` class it raises, and
what would work (``wants``: "a JSON file --save-plan wrote"); a missing file, a directory, an
unreadable one, binary data, bad JSON or a broken npz each becomes one line with the path.
What the contents mean is the caller's to check.
"""
from __future__ import annotations

import json
import zipfile

import numpy as np

_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")     # a zip with members, an empty zip


def _refusal(e: OSError, path: str, what: str, wants: str) -> str:
    if isinstance(e, FileNotFoundError):
        return f"{what} '{path}' does not exist"
    if isinstance(e, IsADirectoryError):
        return f"{what} '{path}' is a directory; give {wants}"
    return f"{what} '{path}' cannot be read ({e.strerror or e})"


def read_json(path: str, what: str, error: type[Exception], wants: str):
    """The JSON value in the file at ``path``; ``error`` with one line if there is none."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise error(_refusal(e, path, what, wants)) from None
    except UnicodeDecodeError:
        raise error(f"{what} '{path}' is not text (binary data); give {wants}") from None
    except json.JSONDecodeError as e:
        raise error(f"{what} '{path}' is not valid JSON ({e}); give {wants}") from None


def read_npz(path: str, what: str, error: type[Exception], wants: str) -> dict[str, np.ndarray]:
    """Every array of the npz file at ``path``, read now and never unpickled; ``error`` with
    one line if it is missing, not a zip, truncated or holds an object array."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise error(_refusal(e, path, what, wants)) from None
    if magic not in _ZIP_MAGIC:
        found = "an empty file" if not magic else "not an npz (zip) file"
        raise error(f"{what} '{path}' cannot be read: it is {found}; give {wants}")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise error(f"{what} '{path}' cannot be read (truncated or corrupt: {reason}); give {wants}") from None
