"""Synthetic training data whose labels come from a fixed random teacher network.

The teacher is the model's own forward graph with weights drawn from another
seed: whatever the architecture, the labels are a function the student can
represent, so the loss can really fall. The batch of iteration i depends only on
(seed, i), which makes resumed runs bit-identical to uninterrupted ones.
"""
from __future__ import annotations

import numpy as np

from . import reference
from .initializers import initial_state
from .ir import Graph, Kind

LOSS_OPS = ("softmax_cross_entropy",)


class TeacherData:
    def __init__(self, g: Graph, seed: int = 0, teacher_seed: int | None = None):
        self.g = g
        self.seed = seed
        self.inputs = g.leaves(Kind.INPUT)
        self.labels = g.leaves(Kind.LABEL)
        self.logits_of: dict[int, int] = {}
        for label in self.labels:
            readers = [g.nodes[u] for u in g.users[label] if g.nodes[u].op in LOSS_OPS]
            if readers:
                self.logits_of[label] = readers[0].inputs[0]
        # The teacher runs only the forward nodes its logits depend on.
        needed = set(self.logits_of.values())
        steps = []
        for n in reversed(g.nodes):
            if needed.intersection(n.outputs):
                steps.append(n.id)
                needed.update(n.inputs)
        self.teacher_steps = steps[::-1]
        teacher = initial_state(g, seed=(seed + 1) * 7919 if teacher_seed is None else teacher_seed)
        self.teacher_state = {t: a for t, a in teacher.items() if t in needed}

    def batch(self, iteration: int) -> dict[int, np.ndarray]:
        """Arrays for every input and label leaf of iteration ``iteration``."""
        rng = np.random.default_rng([self.seed, iteration])
        feeds = {t: rng.standard_normal(self.g.tensors[t].shape).astype(self.g.tensors[t].dtype)
                 for t in self.inputs}
        if self.logits_of:
            out = reference.execute(self.g, self.teacher_steps, {**self.teacher_state, **feeds},
                                    keep=list(self.logits_of.values()))
            for label, logits in self.logits_of.items():
                feeds[label] = np.argmax(out[logits], axis=-1).astype(self.g.tensors[label].dtype)
        for label in self.labels:
            if label not in feeds:   # a label no loss reads: any valid values will do
                feeds[label] = np.zeros(self.g.tensors[label].shape, self.g.tensors[label].dtype)
        return feeds
