"""What a ``.pt2`` file must look like before torch is let near it.

``torch.export.load`` unpickles whatever an archive marks as pickled (weights and constants
with ``use_pickle``, custom and opaque objects), and falls back to an unrestricted unpickler
when its sample inputs do not load with ``weights_only``. A file from outside may run code
that way, so we read the archive's directory and its JSON configs first, without torch, and
refuse: anything that is not a zip, members whose sizes do not add up (a zip bomb), a member
we do not know (compiled AOTInductor code), a pickled weight or constant, a legacy weights
file. The sample inputs are then checked with torch's restricted loader (``check_sample_inputs``)
so that torch's fallback never runs.
"""
from __future__ import annotations

import json
import os
import re
import zipfile

from ..files import member_refusal, memory_refusal
from ..errors import ModelImportError

WANTS = "a file torch.export.save wrote (see the README's recipe)"

# Members of an archive torch.export.save writes, under its one top-level folder.
_KNOWN = re.compile(r"(archive_format|archive_version|byteorder|\.data/version|\.data/serialization_id|"
                    r"models/[^/]+\.json|data/weights/[^/]+|data/constants/[^/]+|data/sample_inputs/[^/]+\.pt|"
                    r"extra/[^/]+)")
_CONFIG = re.compile(r"data/(weights|constants)/[^/]+_config\.json")
MAX_CONFIG_BYTES = 64 << 20


def _refuse(path: str, why: str) -> ModelImportError:
    return ModelImportError(f"'{path}' is not a usable torch.export program: {why}; give {WANTS}")


def check_archive(path: str) -> list[str]:
    """Refuse ``path`` unless it is a .pt2 archive we may hand to torch.export.load; return the
    names of its sample-input members (for ``check_sample_inputs``)."""
    try:
        if not zipfile.is_zipfile(path):
            raise _refuse(path, "it is not a zip archive (.pt2)")
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            _check_sizes(path, infos, os.path.getsize(path))
            roots = {i.filename.split("/", 1)[0] for i in infos}
            if len(roots) != 1 or not all("/" in i.filename for i in infos):
                raise _refuse(path, "its members are not under one folder as torch.export.save writes them")
            samples = []
            for info in infos:
                rest = info.filename.split("/", 1)[1]
                if info.is_dir():
                    continue
                if not _KNOWN.fullmatch(rest):
                    raise _refuse(path, f"it holds '{info.filename}', which is not part of an exported "
                                        "program (compiled code is not accepted)")
                if rest.endswith(".pt") and rest.startswith("data/weights/"):
                    raise _refuse(path, "its weights are in the legacy pickled format; save it again with "
                                        "a current torch.export.save")
                if _CONFIG.fullmatch(rest):
                    _check_payload_config(path, z, info)
                if rest.startswith("data/sample_inputs/"):
                    samples.append(info.filename)
            if not any(_CONFIG.fullmatch(i.filename.split("/", 1)[1]) for i in infos if "/" in i.filename):
                raise _refuse(path, "it has no weights configuration")
            return samples
    except OSError as e:
        raise ModelImportError(f"cannot read '{path}': {e.strerror or e}") from None
    except zipfile.BadZipFile as e:
        raise _refuse(path, f"its zip directory is broken ({e})") from None


def _check_sizes(path: str, infos, file_bytes: int) -> None:
    """Every member's directory entry believable and all of them within this machine's memory
    (engine.files' checks, from the directory alone, before anything is decompressed)."""
    for info in infos:
        why = member_refusal(info, file_bytes)
        if why:
            raise _refuse(path, f"{why} (a zip bomb?)")
    why = memory_refusal(sum(info.file_size for info in infos), "its members")
    if why:
        raise _refuse(path, why)


def _check_payload_config(path: str, z: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
    """No pickled weight or constant, no custom or opaque object."""
    if info.file_size > MAX_CONFIG_BYTES:
        raise _refuse(path, f"'{info.filename}' is {info.file_size} bytes, too large for a configuration")
    try:
        config = json.loads(z.read(info).decode("utf-8"))
        entries = config["config"].items()
        for name, payload in entries:
            if payload.get("use_pickle") is not False:
                raise _refuse(path, f"'{name}' is stored pickled, which is never loaded from a file "
                                    "(save tensors, not Python objects)")
            if not str(payload.get("path_name", "")).startswith(("weight_", "tensor_")):
                raise _refuse(path, f"'{name}' is a custom object, not a tensor")
    except ModelImportError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, UnicodeDecodeError):
        raise _refuse(path, f"'{info.filename}' is not a valid payload configuration") from None


def check_sample_inputs(path: str, members: list[str]) -> None:
    """Each sample-input member loads with torch's restricted (weights-only) unpickler, so
    torch.export.load's unrestricted fallback never runs. Needs torch."""
    import io

    import torch

    with zipfile.ZipFile(path) as z:
        for name in members:
            data = z.read(name)
            if not data:
                continue
            try:
                torch.load(io.BytesIO(data), weights_only=True)
            except Exception as e:     # noqa: BLE001  (torch raises many types; every one is a refusal)
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise _refuse(path, f"its sample inputs '{name}' do not load as plain tensors ({first})") from None
