"""Logical layers (004 Eq. 1): each phase's operators in even groups of consecutive steps,
a group's time T_iter / N_iter * N_group (SmartSwap sees the iteration's time, never an
operator's)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.ir import Graph, Kind, PERSISTENT_KINDS

# Logical layers per phase. 004 Figure 3: the groups' time varies little once there are at most as
# many as the model's layers (32 in its Llama2). Measured at 1/4 of the peak, before the copy queues'
# release points (simulated s, 7B micro-steps
# at 2048/1536/1024 tokens): 16 per phase 30.21/21.06/14.25, 24: 29.37/20.56/13.84, 32: 29.20/20.73/13.82,
# 48: 30.01/20.65/13.91; GPT-2 XL within 1.5% for all.
LAYERS = 32
FORWARD, BACKWARD, OPTIMIZER = 0, 1, 2


@dataclass
class Layers:
    """Logical layers (Eq. 1): per step its layer; per layer its first and last step and time."""
    of_step: np.ndarray
    first: np.ndarray
    last: np.ndarray
    seconds: np.ndarray
    op_seconds: float          # T_iter / N_iter

    @property
    def count(self) -> int:
        return len(self.first)


def phases(g: Graph, order) -> np.ndarray:
    """Per step: FORWARD, BACKWARD (produces gradients) or OPTIMIZER (produces persisted state)."""
    out = np.empty(len(order), dtype=np.int64)
    for step, nid in enumerate(order):
        kinds = {g.tensors[t].kind for t in g.nodes[nid].outputs}
        out[step] = (OPTIMIZER if kinds & set(PERSISTENT_KINDS) else
                     BACKWARD if Kind.GRADIENT in kinds else FORWARD)
    return out


def logical_layers(phase: np.ndarray, iteration_seconds: float, per_phase: int = LAYERS) -> Layers:
    """Each phase's operators in about ``per_phase`` even groups of consecutive steps (a phase
    interrupted by another, as updates between gradients, is grouped run by run, the groups
    shared out by run length); Eq. 1 gives each group's time. Layers are in step order."""
    n = len(phase)
    t_op = iteration_seconds / max(1, n)
    of_step = np.empty(n, dtype=np.int64)
    first, last, secs = [], [], []
    cuts = np.nonzero(np.diff(phase))[0] + 1
    totals = {ph: int((phase == ph).sum()) for ph in (FORWARD, BACKWARD, OPTIMIZER)}
    for run in np.split(np.arange(n), cuts):
        if not len(run):
            continue
        share = per_phase * len(run) / max(1, totals[int(phase[run[0]])])
        for chunk in np.array_split(run, max(1, min(len(run), round(share)))):
            of_step[chunk] = len(first)
            first.append(int(chunk[0]))
            last.append(int(chunk[-1]))
            secs.append(t_op * len(chunk))
    return Layers(of_step, np.array(first, dtype=np.int64), np.array(last, dtype=np.int64),
                  np.array(secs, dtype=float), t_op)
