"""Export a PyTorch model, import it, and run it both ways (the importer tests and bench)."""
from __future__ import annotations

import numpy as np
import torch

from engine import reference
from engine.autodiff import gradients
from engine.importer import import_file
from engine.initializers import initial_state
from engine.library.imported import ImportedModel, read_model


def export_import(model, args, folder, inference: bool = False) -> ImportedModel:
    """torch.export.export and save ``model`` (as the README's recipe), import it into ``folder``."""
    pt2 = f"{folder}.pt2"
    torch.export.save(torch.export.export(model, args), pt2)
    import_file(pt2, str(folder), inference=inference)
    return read_model(str(folder))


def feeds_of(imported: ImportedModel, g, args) -> dict[int, np.ndarray]:
    """Our graph's inputs fed the torch arguments, in the export's order."""
    return {g.tensor_id(name): a.detach().numpy() for name, a in zip(imported.inputs, args)}


def ours(imported: ImportedModel, args):
    """(loss, {parameter name: gradient}, {state name: next value}) from our forward graph,
    our autodiff and the numpy reference."""
    g = imported.forward_graph()
    grads = gradients(g, g.loss)
    nxt = {g.tensors[c].name: x for c, x in g.state_pairs if c != x}
    out = reference.execute(g, g.default_order(), {**initial_state(g, 0), **feeds_of(imported, g, args)},
                            keep=[g.loss, *grads.values(), *nxt.values()])
    return (float(out[g.loss]), {g.tensors[p].name: out[gp] for p, gp in grads.items()},
            {name: out[t] for name, t in nxt.items()})


def theirs(model, args):
    """(loss, {parameter name: gradient}, {buffer name: value after the step}) from PyTorch."""
    model.zero_grad()
    loss = model(*args)
    loss.backward()
    grads = {n: p.grad.detach().numpy().copy() for n, p in model.named_parameters()}
    buffers = {n: b.detach().numpy().copy() for n, b in model.named_buffers() if b.is_floating_point()}
    return float(loss.detach()), grads, buffers


def relative_error(a, b) -> float:
    """max |a - b| over max |b|; a gradient that is zero in exact arithmetic (a bias before a
    batch norm) is rounding noise of 1e-17 on both sides, so the scale is at least 1e-6."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = max(float(np.max(np.abs(b))) if b.size else 0.0, 1e-6)
    return float(np.max(np.abs(a - b))) / scale if a.size else 0.0


def torch_losses(model, optimizer, batches) -> np.ndarray:
    """PyTorch's loss at each step of training ``model`` with ``optimizer`` on ``batches``."""
    losses = []
    for b in batches:
        optimizer.zero_grad()
        loss = model(*b)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return np.array(losses)


def our_losses(imported: ImportedModel, optimizer, batches) -> np.ndarray:
    """Our loss at each step of training ``imported`` (our optimizer, the numpy reference)."""
    from engine.library.imported import training_graph
    from engine.training import ReferenceRunner

    g = training_graph(imported, optimizer)
    runner = ReferenceRunner(g)
    runner.load_state(initial_state(g, 0))
    return np.array([runner.step(feeds_of(imported, g, b)) for b in batches])
