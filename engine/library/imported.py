"""An imported model's folder: what ``python -m engine.importer`` writes and ``--model DIR`` reads.

    DIR/model.json   {"format": "swapengine.model/1", "task": "train" | "inference",
                      "graph": the forward graph (engine.graph_io, its loss or outputs set),
                      "inputs": the export's user inputs in order (tensor names),
                      "values": {"file": "values.npz", "names": [tensor name, ...]},
                      "source": where it came from, "notes": what the importer left out}
    DIR/values.npz   v0, v1, ...: the values of "names" in order (parameters, buffers, constants)

The graph is the forward pass only: ``training_graph`` adds our backward and the optimizer,
so recomputation and swapping stay the planner's. Reading needs neither torch nor pickle:
the JSON and npz readers are engine.files', and every value must have exactly the shape and
dtype of its tensor.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from ..autodiff import SGD, Adam, build_training_graph
from ..checkpoint import write_atomically
from ..errors import ModelImportError
from ..files import read_json, read_npz
from ..graph_io import graph_from_dict, graph_to_dict
from ..initializers import IMPORTED
from ..ir import PERSISTENT_KINDS, Graph, GraphError

FORMAT = "swapengine.model/1"
MODEL_FILE = "model.json"
VALUES_FILE = "values.npz"
TASKS = ("train", "inference")
WANTS = "a folder python -m engine.importer wrote"


@dataclass
class ImportedModel:
    path: str
    task: str
    description: dict     # model.json as read (graph included), to rebuild the graph afresh
    values: dict[str, np.ndarray]

    def forward_graph(self) -> Graph:
        """A fresh copy of the forward graph with its values (each call builds a new one,
        since building the training graph extends it in place)."""
        g = graph_from_dict(self.description["graph"])
        g.initial_values = self.values
        return g

    @property
    def inputs(self) -> list[str]:
        return list(self.description["inputs"])


def is_model_folder(spec: str) -> bool:
    """Whether ``--model spec`` names a folder (an imported model) rather than a zoo model."""
    return os.path.isfile(os.path.join(spec, MODEL_FILE)) or os.sep in spec or spec.endswith(MODEL_FILE)


def write_model(folder: str, graph: Graph, values: dict[str, np.ndarray], task: str,
                inputs: list[str], source: dict, notes: list[str]) -> None:
    """Write ``graph`` (forward, loss or outputs set) and its leaves' values to ``folder``."""
    os.makedirs(folder, exist_ok=True)
    names = sorted(values)
    description = {"format": FORMAT, "task": task, "graph": graph_to_dict(graph), "inputs": list(inputs),
                   "values": {"file": VALUES_FILE, "names": names}, "source": source, "notes": list(notes)}
    arrays = {f"v{i}": np.array(values[n], order="C") for i, n in enumerate(names)}     # 0-d stays 0-d
    write_atomically(os.path.join(folder, VALUES_FILE), lambda f: np.savez(f, **arrays))
    text = json.dumps(description, indent=1)
    write_atomically(os.path.join(folder, MODEL_FILE), lambda f: f.write(text.encode()))


def read_model(spec: str) -> ImportedModel:
    """The model in folder ``spec`` (or its model.json), checked; ModelImportError (one line) if not."""
    folder = os.path.dirname(spec) if spec.endswith(MODEL_FILE) and not os.path.isdir(spec) else spec
    path = os.path.join(folder, MODEL_FILE)
    if not os.path.isdir(folder):
        raise ModelImportError(f"--model {spec}: no such folder; give {WANTS}")
    d = read_json(path, "model file", ModelImportError, WANTS)
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ModelImportError(f"'{path}' is not an imported model (expected format '{FORMAT}'); give {WANTS}")
    task, inputs, values_spec = d.get("task"), d.get("inputs"), d.get("values")
    if task not in TASKS:
        raise ModelImportError(f"'{path}': task must be one of {', '.join(TASKS)}, got {task!r}")
    if not isinstance(inputs, list) or not all(isinstance(n, str) for n in inputs):
        raise ModelImportError(f"'{path}': 'inputs' must be a list of tensor names")
    if (not isinstance(values_spec, dict) or values_spec.get("file") != VALUES_FILE
            or not isinstance(values_spec.get("names"), list)
            or not all(isinstance(n, str) for n in values_spec["names"])):
        raise ModelImportError(f"'{path}': 'values' must name {VALUES_FILE} and list tensor names")
    try:
        g = graph_from_dict(d.get("graph"))
    except GraphError as e:
        raise ModelImportError(f"'{path}': {e}") from None
    arrays = read_npz(os.path.join(folder, VALUES_FILE), "model values file", ModelImportError, WANTS)
    names = values_spec["names"]
    if sorted(arrays) != sorted(f"v{i}" for i in range(len(names))):
        raise ModelImportError(f"'{folder}/{VALUES_FILE}' does not hold the {len(names)} values "
                               f"'{MODEL_FILE}' lists; re-import the model")
    values = {n: arrays[f"v{i}"] for i, n in enumerate(names)}
    _check_values(path, g, values)
    _check_task(path, g, task, inputs)
    return ImportedModel(folder, task, d, values)


def _check_values(path: str, g: Graph, values: dict[str, np.ndarray]) -> None:
    imported = {g.tensors[t].name: g.tensors[t] for t in g.leaves(*PERSISTENT_KINDS)
                if g.tensors[t].init == IMPORTED}
    for name, x in imported.items():
        a = values.get(name)
        if a is None:
            raise ModelImportError(f"'{path}': tensor '{name}' has no value in {VALUES_FILE}; re-import the model")
        if a.shape != x.shape or a.dtype != x.dtype:
            raise ModelImportError(f"'{path}': the value of '{name}' is {a.dtype}{list(a.shape)}, but the tensor "
                                   f"is {x.dtype}{list(x.shape)}; re-import the model")
    extra = sorted(set(values) - set(imported))
    if extra:
        raise ModelImportError(f"'{path}': {VALUES_FILE} holds values for {len(extra)} tensors the graph does not "
                               f"import (first: '{extra[0]}'); re-import the model")


def _check_task(path: str, g: Graph, task: str, inputs: list[str]) -> None:
    names = {t.name for t in g.tensors}
    missing = [n for n in inputs if n not in names]
    if missing:
        raise ModelImportError(f"'{path}': input '{missing[0]}' is not a tensor of the graph")
    if task == "train":
        if g.loss is None or g.tensors[g.loss].shape != () or g.tensors[g.loss].dtype.kind != "f":
            raise ModelImportError(f"'{path}': a training model needs a scalar floating-point loss")
    elif not g.outputs:
        raise ModelImportError(f"'{path}': an inference model needs at least one output")


def training_graph(model: ImportedModel, optimizer: SGD | Adam) -> Graph:
    """The whole iteration of an imported training model: its forward, our backward and
    ``optimizer``'s updates, with the imported values as its initial state."""
    if model.task != "train":
        raise ModelImportError(f"--model {model.path} is an inference program (no loss); run it with "
                               "python -m engine.infer, or export model and loss together to train it")
    g = model.forward_graph()
    try:
        return build_training_graph(g, g.loss, optimizer)
    except GraphError as e:
        raise ModelImportError(f"--model {model.path}: {e}") from None
