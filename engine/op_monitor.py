"""SmartSwap's lightweight online monitor and stage machine (004 Section 3, Algorithm 1).

Each iteration, the operators the engine dispatched become an integer sequence, as a
tokenizer would make them: per operator one token from its kind (a small integer, assigned
the first time an operator name is seen) and the size class of what it writes. The sequence
is compared with the previous iteration's (length, and cosine similarity of token counts): the stage machine stays while the length changes by less than
5% and the cosine similarity is above 95%, and otherwise goes back to WarmUp:

    WarmUp --(more than m similar iterations)--> GenPolicy --(more than n)--> Stable

WarmUp plans nothing new that it would keep: a graph not seen before gets the policy's default
plan; GenPolicy generates alternatives for the current sequence and keeps the fastest; Stable
reuses it. The plan cache (``engine/library/stream_plans.py``) is keyed by the exact sequence
(``SequenceKey``), so a bucket seen before reuses its verified plan in any stage.
"""
from __future__ import annotations

import hashlib
import time
import weakref
from dataclasses import dataclass, field

import numpy as np

from .ir import Graph

WARMUP, GENPOLICY, STABLE = "WarmUp", "GenPolicy", "Stable"
STAGES = (WARMUP, GENPOLICY, STABLE)
LENGTH_CHANGE = 0.05       # Algorithm 1: back to WarmUp when the length changes by more than this
MIN_COSINE = 0.95          # ... or the cosine similarity drops below this
M_ITERATIONS, N_ITERATIONS = 2, 5    # the paper's m and n (Section 6)
SIZE_BITS = 4                        # size classes 16x apart


class Tokenizer:
    """Operator names -> small integers, assigned in order of first sight. A graph's operators
    are read once (a built graph does not change; re-read if it grew); each iteration then only
    joins the token arrays of the graphs it ran, as a dispatch hook that maps each operator to
    an integer would (004's low-overhead mode)."""

    def __init__(self):
        self.ids: dict[str, int] = {}
        self._read: "weakref.WeakKeyDictionary[Graph, tuple]" = weakref.WeakKeyDictionary()

    def _arrays(self, g: Graph) -> tuple[np.ndarray, np.ndarray]:
        """(kind, elements written) per operator of ``g``."""
        got = self._read.get(g)
        if got is None or len(got[0]) != len(g.nodes):
            ids, tensors = self.ids, g.tensors
            kinds = np.array([ids.setdefault(n.op, len(ids) + 1) for n in g.nodes], dtype=np.int64)
            elements = np.array([sum(tensors[t].nbytes // tensors[t].dtype.itemsize for t in n.outputs)
                                 for n in g.nodes], dtype=np.int64)
            got = self._read[g] = (kinds, elements)
        return got

    def sequence(self, graphs: list[Graph]) -> np.ndarray:
        """The iteration's operators (each graph's, in dispatch order), one int64 token each:
        its kind times 64 plus its size class (elements written, in steps of 2**SIZE_BITS: a
        bucket twice as long stays in its class; the cache key of the exact graph does not)."""
        parts = []
        for g in graphs:
            kinds, elements = self._arrays(g)
            bits = np.frexp(elements)[1]        # bit length of each count (0 for 0), exact below 2**53
            parts.append(kinds * 64 + bits // SIZE_BITS)
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def exact(self, graphs: list[Graph]) -> np.ndarray:
        """(kind, elements written) per operator, flattened: what the plan cache is keyed by."""
        parts = [np.stack(self._arrays(g), axis=1).ravel() for g in graphs]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def key_of(seq: np.ndarray) -> str:
    """The plan cache's key: a hash of the exact sequence."""
    return hashlib.sha1(seq.tobytes()).hexdigest()[:20]


def length_change(a: np.ndarray, b: np.ndarray) -> float:
    return abs(len(a) - len(b)) / max(1, len(b))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two sequences' token counts. (Elementwise, one operator inserted
    early, a GPT's position slice at one length and not another, would shift every later
    token and read as a new sequence; the counts see one token more.)"""
    n = int(max(a.max(initial=0), b.max(initial=0))) + 1
    x = np.bincount(a, minlength=n).astype(float)
    y = np.bincount(b, minlength=n).astype(float)
    den = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(x @ y) / den if den else 1.0


class StageMachine:
    """Algorithm 1. ``update(seq)`` after each iteration returns the stage for the next."""

    def __init__(self, m: int = M_ITERATIONS, n: int = N_ITERATIONS):
        self.m, self.n = m, n
        self.stable_steps = 0
        self.prev: np.ndarray | None = None
        self.stage = WARMUP

    def similar(self, seq: np.ndarray) -> bool:
        prev = self.prev if self.prev is not None else seq
        return length_change(seq, prev) < LENGTH_CHANGE and cosine(seq, prev) > MIN_COSINE

    def update(self, seq: np.ndarray) -> str:
        if self.similar(seq):
            self.stable_steps += 1
            if self.stage == WARMUP and self.stable_steps > self.m:
                self.stage, self.stable_steps = GENPOLICY, 0
            elif self.stage == GENPOLICY and self.stable_steps > self.n:
                self.stage = STABLE
        else:
            self.stage, self.stable_steps = WARMUP, 0
        self.prev = seq
        return self.stage


@dataclass
class Monitor:
    """Tokenizes each iteration, runs the stage machine, and keeps the log: per iteration its
    stage, its sequence key and the seconds the monitor itself took."""
    machine: StageMachine = field(default_factory=StageMachine)
    tokenizer: Tokenizer = field(default_factory=Tokenizer)
    log: list[tuple[int, str, str, float]] = field(default_factory=list)   # (iteration, stage, key, s)

    @property
    def stage(self) -> str:
        return self.machine.stage

    def observe(self, iteration: int, graphs: list[Graph]) -> str:
        t0 = time.perf_counter()
        seq = self.tokenizer.sequence(graphs)
        stage = self.machine.update(seq)
        key = key_of(seq)
        self.log.append((iteration, stage, key, time.perf_counter() - t0))
        return stage

    def transitions(self) -> list[tuple[int, str]]:
        """(iteration, new stage) at every change of stage."""
        out, prev = [], WARMUP
        for i, stage, _, _ in self.log:
            if stage != prev:
                out.append((i, stage))
                prev = stage
        return out


def stages_figure(log: list[tuple[int, str, str, float]], title: str, evaluations=(), nonfinite=(), rss=None):
    """The monitor's stage against the iteration (``Monitor.log``), the evaluation iterations
    (which change the operator sequence, so the stage goes back to WarmUp) and forced non-finite
    steps marked; with ``rss`` (bytes per iteration) a second panel of the resident set size.
    A matplotlib Figure; raises ImportError without matplotlib."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 5 if rss is not None else 3.2), layout="constrained")
    axes = fig.subplots(2 if rss is not None else 1, 1, sharex=True, squeeze=False)[:, 0]
    ax = axes[0]
    ax.step([i for i, *_ in log], [STAGES.index(s) for _, s, _, _ in log], where="post", color="tab:blue",
            zorder=3, label="monitor stage")
    ax.set_yticks(range(len(STAGES)), STAGES)
    ax.set_ylabel("monitor stage")
    fig.suptitle(title, fontsize=10)
    for i, marked in enumerate(evaluations):
        for a in axes:
            a.axvline(marked, color="tab:gray", linestyle=":", linewidth=0.8, zorder=1,
                      label="evaluation iteration" if i == 0 and a is ax else None)
    for i, marked in enumerate(nonfinite):
        for a in axes:
            a.axvline(marked, color="tab:red", linestyle="--", linewidth=1.2, zorder=2,
                      label="forced non-finite loss" if i == 0 and a is ax else None)
    if rss is not None:
        axes[1].plot(np.arange(len(rss)), np.asarray(rss) / 2**20, color="tab:green", zorder=3)
        axes[1].set_ylabel("resident set size (MiB)")
    axes[-1].set_xlabel("iteration (from 0)")
    ax.legend(loc="lower left", bbox_to_anchor=(1.01, 0), fontsize=8)      # beside the panel: hides no step
    return fig
