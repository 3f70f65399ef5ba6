"""A user's own training data in place of the synthetic teacher's (engine/data.py).

Two forms: a whole data set of arrays named as the graph's input and label leaves
(``--data FILE.npz``, or a mapping in ``engine.api.train``), visited in a fresh order each
epoch exactly as the synthetic data is (``data.batch_indices``: a batch depends only on the
seed and the iteration, so a resumed run draws what an uninterrupted one would); or, in the
API, an iterator of ready-made batches, taken one per iteration. Every array is checked
against the leaf it feeds (name, dtype, trailing shape, integer ids within the table or
classes they index) before any work, and a mismatch is one line naming the member, what it
is and what the graph wants.
"""
from __future__ import annotations

import os
from typing import Iterable, Iterator, Mapping

import numpy as np

from .data import DataSet, _loss_reader
from .errors import EngineError
from .files import read_npz
from .ir import Graph, Kind


class DataError(EngineError):
    """User data that does not fit the graph's inputs: one line, exit status 2."""


def _leaves(g: Graph) -> dict[str, int]:
    return {g.tensors[t].name: t for t in g.leaves(Kind.INPUT, Kind.LABEL)}


def expected(g: Graph, whole_set: bool = True) -> str:
    """What the graph's inputs want, in words: ``x0 [N, 8] float32, labels [N] int32``."""
    parts = []
    for name, t in _leaves(g).items():
        x = g.tensors[t]
        dims = ["N" if whole_set else str(x.shape[0]), *map(str, x.shape[1:])]
        parts.append(f"{name} [{', '.join(dims)}] {x.dtype}")
    return ", ".join(parts)


def _id_limit(g: Graph, t: int) -> tuple[int, str] | None:
    """(exclusive upper bound, what it counts) of an integer leaf: the rows of the embedding
    table its ids index, or the classes of the loss its labels name; None if unbounded here."""
    for u in g.users[t]:
        n = g.nodes[u]
        if n.op == "embedding":
            return g.tensors[n.inputs[0]].shape[0], "rows of the embedding table"
    reader = _loss_reader(g, t)
    if reader is not None:
        return g.tensors[reader.inputs[0]].shape[-1], "classes of the loss"
    return None


def check_arrays(g: Graph, arrays: Mapping[str, object], source: str, whole_set: bool = True) -> dict[int, np.ndarray]:
    """``arrays`` (name -> array) as tensor id -> array, checked against the graph's input
    and label leaves; DataError naming the first problem. ``whole_set``: a data set of N >=
    batch samples (False: exactly one batch)."""
    leaves = _leaves(g)
    wants = f"the graph's inputs are {expected(g, whole_set)}"
    for name in arrays:
        if name not in leaves:
            raise DataError(f"{source}: '{name}' feeds no input of {g.name}; {wants}")
    for name in leaves:
        if name not in arrays:
            raise DataError(f"{source}: no array named '{name}'; {wants} (e.g. np.savez(FILE, "
                            f"{', '.join(f'{n}=...' for n in leaves)}))")
    out, samples = {}, None
    for name, t in leaves.items():
        a, x = arrays[name], g.tensors[t]
        if not isinstance(a, np.ndarray):
            raise DataError(f"{source}: '{name}' is a {type(a).__name__}, not a numpy array; {wants}")
        if a.dtype != x.dtype:
            hint = f"cast it: {name}.astype('{x.dtype}')"
            if x.dtype.kind == "f" and a.dtype.name in ("float32", "float64"):
                hint += f", or build the model with --dtype {a.dtype}"
            elif x.dtype.kind in "iu" and a.dtype.kind not in "iu":
                hint = f"give integer ids ({x.dtype})"
            raise DataError(f"{source}: '{name}' is {a.dtype}, the graph's input is {x.dtype}; {hint}")
        want = (a.shape[0] if whole_set and a.ndim else x.shape[0], *x.shape[1:])
        if a.ndim != len(x.shape) or a.shape != want:
            raise DataError(f"{source}: '{name}' has shape {list(a.shape)}; {wants}")
        if samples is not None and a.shape[0] != samples:
            raise DataError(f"{source}: '{name}' has {a.shape[0]} samples and the arrays before it {samples}; "
                            "give every array the same number of samples (its first dimension)")
        samples = a.shape[0]
        limit = _id_limit(g, t) if x.dtype.kind in "iu" else None
        if limit and a.size and (a.min() < 0 or a.max() >= limit[0]):
            bad = int(a.min()) if a.min() < 0 else int(a.max())
            raise DataError(f"{source}: '{name}' holds {bad}, outside 0..{limit[0] - 1} (the {limit[0]} "
                            f"{limit[1]}); give ids in that range")
        out[t] = np.ascontiguousarray(a)
    batch = g.tensors[next(iter(leaves.values()))].shape[0] if leaves else 1
    if whole_set and samples is not None and samples < batch:
        raise DataError(f"{source}: {samples} samples, fewer than one batch of {batch}; give at least {batch} or "
                        "a smaller --batch")
    return out


def read_data_file(path: str) -> dict[str, np.ndarray]:
    """The arrays of an npz data set, read without unpickling (engine/files.py's checks)."""
    return read_npz(path, "data file", DataError, "an npz of arrays named as the model's inputs "
                    "(np.savez(FILE, name=array, ...))")


class ArrayData(DataSet):
    """A whole data set of the user's arrays, drawn as the synthetic data is."""

    def __init__(self, g: Graph, arrays: Mapping[str, object], seed: int = 0, source: str = "data"):
        super().__init__(g, seed)
        self.data = check_arrays(g, arrays, source)
        self.samples = next(iter(self.data.values())).shape[0] if self.data else 1


class IteratorData:
    """Batches the caller makes, one per iteration in the order given (not resumable: the
    iterator is consumed); each is checked as it arrives."""

    def __init__(self, g: Graph, batches: Iterable[Mapping[str, object]], source: str = "data"):
        self.g, self.source = g, source
        self._it: Iterator = iter(batches)
        self.taken = 0

    def batch(self, iteration: int) -> dict[int, np.ndarray]:
        try:
            given = next(self._it)
        except StopIteration:
            raise DataError(f"{self.source}: the batches ran out after {self.taken}; give one per iteration") from None
        if not isinstance(given, Mapping):
            raise DataError(f"{self.source}: batch {self.taken + 1} is a {type(given).__name__}, not a mapping of "
                            f"input name to array; the graph's inputs are {expected(self.g, False)}")
        checked = check_arrays(self.g, given, f"{self.source} batch {self.taken + 1}", whole_set=False)
        self.taken += 1
        return checked


def user_data(g: Graph, data, seed: int = 0):
    """The data object a Trainer reads for ``data``: None (the synthetic teacher's, made by
    the Trainer), a path to an npz data set, a mapping of name to array (a whole data set),
    or an iterable of batches (mappings of name to one batch's array)."""
    if data is None:
        return None
    if isinstance(data, (str, os.PathLike)):
        return ArrayData(g, read_data_file(os.fspath(data)), seed, f"data file '{os.fspath(data)}'")
    if isinstance(data, Mapping):
        return ArrayData(g, data, seed)
    if isinstance(data, Iterable):
        return IteratorData(g, data)
    raise DataError(f"data: a {type(data).__name__}; give a path to an npz, a mapping of input name to array, "
                    "or an iterable of such mappings (one per batch)")
