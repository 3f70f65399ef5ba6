"""Bring your own model: a PyTorch program exported with ``torch.export`` as our graph.

    python -m engine.importer model.pt2 -o model/      # needs torch (pip install ".[torch]")
    python -m engine.train --model model/ --memory 30%  # needs no torch

The archive is checked before torch loads it (``archive``: nothing pickled is ever loaded),
decomposed to Core ATen and converted node by node (``program``, ``convert``, ``aten``); the
result is a folder ``engine.library.imported`` reads: the forward graph and the values of
its parameters, buffers and constants. Our autodiff derives the backward, so the planner
swaps and recomputes imported models as it does the zoo's. Only this package imports torch.
"""
from __future__ import annotations

import os

from ..library.imported import write_model


def import_file(path: str, out: str, inference: bool = False, name: str | None = None):
    """Import the .pt2 at ``path`` into folder ``out``; returns engine.importer.program.Imported."""
    import torch

    from .program import convert_program, load_program

    ep = load_program(path)
    name = name or os.path.splitext(os.path.basename(path))[0]
    imported = convert_program(ep, name, inference)
    source = {"file": os.path.basename(path), "torch": torch.__version__, "aten_operators": imported.aten_ops}
    write_model(out, imported.graph, imported.values, imported.task, imported.inputs, source, imported.notes)
    return imported
