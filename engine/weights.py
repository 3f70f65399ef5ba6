"""Trained parameters out, for other tools: safetensors (PyTorch, Hugging Face) or npz, chosen
by the file's extension.

The safetensors format is written here rather than through the ``safetensors`` package, so
saving weights needs nothing beyond numpy: an 8-byte little-endian header length, a JSON
header mapping each name to its dtype, shape and byte range (``data_offsets``, relative to
the data after the header; padded with spaces to 8 bytes, as the reference writer does), then
the raw little-endian bytes in that order. The tests read it back with the ``safetensors``
package and with torch, bit for bit. Checkpoints (engine/checkpoint.py) stay the format for
resuming: they hold the optimizer's state and the run's settings too.
"""
from __future__ import annotations

import io
import json
import os
import struct
from typing import Mapping

import numpy as np

from .checkpoint import write_atomically
from .errors import EngineError
from .ir import Kind

FORMATS = (".safetensors", ".npz")
# numpy dtype name -> safetensors dtype (the spec's names)
_SAFETENSORS_DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64", "int32": "I32",
                       "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}


class WeightsError(EngineError):
    """A weights file that cannot be written as asked: one line."""


def weights_format(path: str) -> str:
    """The extension ``path`` is written by (.safetensors or .npz); WeightsError otherwise."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise WeightsError(f"--save-weights {path}: the extension says the format; end the name with "
                           f"{' or '.join(FORMATS)}")
    return ext


def safetensors_bytes(arrays: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None) -> bytes:
    """The safetensors file of ``arrays`` (name -> array), names in sorted order."""
    header: dict = {"__metadata__": dict(metadata)} if metadata else {}
    chunks, offset = [], 0
    for name in sorted(arrays):
        a = np.asarray(arrays[name])
        kind = _SAFETENSORS_DTYPES.get(a.dtype.name)
        if kind is None:
            raise WeightsError(f"tensor '{name}' is {a.dtype}, which safetensors does not hold; save as .npz")
        data = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": kind, "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **{name: np.asarray(a) for name, a in arrays.items()})
    return buffer.getvalue()


def write_parameters(path: str, graph, named: Mapping[str, np.ndarray]) -> tuple[str, int]:
    """Write ``graph``'s parameters, taken by name from ``named`` (a trained state; the
    optimizer's tensors are left out), to ``path`` with the model's name in the metadata;
    returns (the extension, how many tensors)."""
    params = {graph.tensors[t].name: named[graph.tensors[t].name] for t in graph.leaves(Kind.PARAMETER)}
    return write_weights(path, params, {"format": "pt", "model": graph.name}), len(params)


def write_weights(path: str, arrays: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None) -> str:
    """Write ``arrays`` to ``path`` (atomically: a reader never sees half a file) in the format
    its extension names; returns that extension."""
    ext = weights_format(path)
    data = safetensors_bytes(arrays, metadata) if ext == ".safetensors" else npz_bytes(arrays)
    write_atomically(path, lambda f: f.write(data))
    return ext
