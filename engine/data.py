"""Synthetic training data: a fixed data set labelled by a fixed random teacher network.

The teacher is the model's own forward graph with weights drawn from another
seed (integer inputs are ids, uniform over the embedding table reading them; a GPT's
labels are thus its teacher's next-token predictions from each prefix): whatever the architecture, the labels are a function the student can
represent, so the loss can really fall. The data set (``samples`` inputs drawn
once) is visited in a fresh random order each epoch; the batch of iteration i
depends only on (seed, i), which makes resumed runs bit-identical to
uninterrupted ones.
"""
from __future__ import annotations

import numpy as np

from . import reference
from .initializers import initial_state
from .ir import Graph, Kind

LOSS_OPS = ("softmax_cross_entropy", "nll_loss")     # their first input is the logits (or log-probabilities)


def _draw(rng, g: Graph, t: int, samples: int) -> np.ndarray:
    """``samples`` values of input ``t``: N(0, 1) floats, or ids uniform over the rows of the
    embedding table that reads them (token sequences)."""
    x = g.tensors[t]
    shape = (samples, *x.shape[1:])
    if x.dtype.kind in "iu":
        tables = [g.nodes[u].inputs[0] for u in g.users[t] if g.nodes[u].op == "embedding"]
        rows = g.tensors[tables[0]].shape[0] if tables else 2
        return rng.integers(0, rows, size=shape).astype(x.dtype)
    return rng.standard_normal(shape).astype(x.dtype)


def _loss_reader(g: Graph, label: int):
    """The loss node reading ``label``, directly or through reshapes (a [batch, seq] label
    flattened to one class per row), or None."""
    frontier = [label]
    for t in frontier:
        for u in g.users[t]:
            n = g.nodes[u]
            if n.op in LOSS_OPS:
                return n
            if n.op == "reshape":
                frontier.append(n.outputs[0])
    return None


class DataSet:
    """Whole arrays for a graph's input and label leaves (``data``: tensor id -> [samples,
    ...]) drawn a batch at a time in batch_indices' order; the synthetic teacher's data and a
    user's (engine/user_data.ArrayData) alike."""

    data: dict[int, np.ndarray]
    samples: int

    def __init__(self, g: Graph, seed: int):
        self.g = g
        self.seed = seed
        self.inputs = g.leaves(Kind.INPUT)
        self.labels = g.leaves(Kind.LABEL)
        leaves = self.inputs + self.labels
        self.batch_size = g.tensors[leaves[0]].shape[0] if leaves else 1

    def batch(self, iteration: int) -> dict[int, np.ndarray]:
        """Arrays for every input and label leaf of iteration ``iteration``."""
        idx = batch_indices(self.seed, iteration, self.batch_size, self.samples)
        return {t: np.ascontiguousarray(a[idx]) for t, a in self.data.items()}


class TeacherData(DataSet):
    def __init__(self, g: Graph, seed: int = 0, samples: int = 256, teacher_seed: int | None = None):
        super().__init__(g, seed)
        chunks = max(1, -(-samples // self.batch_size))
        self.samples = chunks * self.batch_size
        rng = np.random.default_rng([seed, 0x5EED])
        self.data = {t: _draw(rng, g, t, self.samples) for t in self.inputs}
        for label in self.labels:
            self.data[label] = np.zeros((self.samples, *g.tensors[label].shape[1:]), g.tensors[label].dtype)
        self._label_with_teacher(chunks, (seed + 1) * 7919 if teacher_seed is None else teacher_seed)

    def _label_with_teacher(self, chunks: int, teacher_seed: int) -> None:
        g = self.g
        logits_of = {}
        for label in self.labels:
            reader = _loss_reader(g, label)
            if reader is not None:
                logits_of[label] = reader.inputs[0]
        if not logits_of:
            return
        # The teacher runs only the forward nodes its logits depend on.
        needed = set(logits_of.values())
        steps = []
        for n in reversed(g.nodes):
            if needed.intersection(n.outputs):
                steps.append(n.id)
                needed.update(n.inputs)
        steps.reverse()
        teacher = {t: a for t, a in initial_state(g, teacher_seed).items() if t in needed}
        outs = {label: [] for label in logits_of}
        b = self.batch_size
        for c in range(chunks):
            feeds = {t: self.data[t][c * b:(c + 1) * b] for t in self.inputs}
            out = reference.execute(g, steps, {**teacher, **feeds}, keep=list(logits_of.values()))
            for label, logits in logits_of.items():
                outs[label].append(out[logits].astype(np.float64))
        for label, parts in outs.items():
            # Standardise each class's logit over the data set first: a random teacher favours a
            # few classes by a constant margin, which would make the labels nearly constant.
            z = np.concatenate(parts)
            z = (z - z.mean(axis=0)) / (z.std(axis=0) + 1e-6)
            self.data[label][...] = np.argmax(z, axis=-1).reshape(self.data[label].shape)

def batch_indices(seed: int, iteration: int, batch: int, samples: int) -> np.ndarray:
    """The samples of iteration ``iteration``: each epoch a fresh permutation of the data set
    (from ``seed`` and the epoch alone, so a resumed run draws what an uninterrupted one
    would), cut into ``samples // batch`` whole batches; a remainder short of a batch is
    skipped that epoch (a user's data set need not be a multiple of the batch)."""
    per_epoch = samples // batch
    epoch, k = divmod(iteration, per_epoch)
    order = np.random.default_rng([seed, epoch]).permutation(samples)
    return np.sort(order[k * batch:(k + 1) * batch])
