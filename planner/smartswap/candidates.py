"""What SmartSwap may move (004 Sections 4.2-4.3): the device storages (an in-place chain is
one), the candidates (a storage's stay between two consecutive uses; for persistent state, the
stretch outside the update, which makes it host-held instead of resident) and Eq. 2's score."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.ir import Graph, Kind, PERSISTENT_KINDS


def score(mres: np.ndarray, sizes: np.ndarray, c: float) -> np.ndarray:
    """Eq. 2: MREs covered and size, each normalised by its largest value, size weighted by C."""
    m = mres / mres.max() if len(mres) and mres.max() > 0 else np.zeros(len(mres))
    s = sizes / sizes.max() if len(sizes) and sizes.max() > 0 else np.zeros(len(sizes))
    return m + c * s


@dataclass
class Storage:
    """One device storage (an in-place chain is one): its tensors and the steps touching it."""
    root: int
    nbytes: int
    steps: list[int]                       # sorted, unique: steps reading or writing it
    writes: dict[int, int]                 # step -> tensor written there
    host_leaf: bool                        # a leaf whose host copy is current at the start
    pinned: bool = False                   # resident state: one stay, the whole iteration
    gaps: list[tuple[int, int, int, int]] = field(default_factory=list)  # (a, b, release, trigger)
    copy_out_at_end: bool = False          # host-held state: its next value goes to the host
    end_release: int = -1                  # ...and the step after which that copy has finished

    def afresh(self) -> "Storage":
        """A copy whose decisions may change without changing this one's (its steps and writes
        are shared: nothing changes them). Every field copied as it is, whatever fields come
        later, at a quarter of ``dataclasses.replace``'s cost (10,000 storages a run at rnn-8-8k)."""
        other = Storage.__new__(Storage)
        other.__dict__.update(self.__dict__)
        other.gaps = list(self.gaps)
        return other

    def content(self, step: int) -> int:
        """The tensor this storage holds after ``step``: the last written up to it."""
        done = [k for k in self.writes if k <= step]
        return self.writes[max(done)] if done else self.root


def root_map(g: Graph, lt) -> np.ndarray:
    """Per tensor, the root of its storage (outputs written in place share their input's)."""
    owns, _ = lt.storage()
    root = np.arange(len(g.tensors))
    merged = np.nonzero(~owns)[0]
    for t in merged[np.argsort(lt.start[merged], kind="stable")]:
        root[t] = root[lt.inplace_of[t]]
    return root


def storages(g: Graph, order, lt) -> list[Storage]:
    root = root_map(g, lt)
    pos = {nid: s for s, nid in enumerate(order)}
    steps: dict[int, set] = {}
    writes: dict[int, dict] = {}
    for nid in order:
        s = pos[nid]
        n = g.nodes[nid]
        for t in n.inputs:
            steps.setdefault(int(root[t]), set()).add(s)
        for t in n.outputs:
            r = int(root[t])
            steps.setdefault(r, set()).add(s)
            writes.setdefault(r, {})[s] = t
    host = np.zeros(len(g.tensors), dtype=bool)
    host[g.leaves(Kind.INPUT, Kind.LABEL, *PERSISTENT_KINDS)] = True
    out = []
    for r, ss in steps.items():
        members = [t for t in writes.get(r, {}).values()] + [r]
        out.append(Storage(r, max(g.tensors[t].nbytes for t in members), sorted(ss), writes.get(r, {}),
                           bool(host[r])))
    return out


@dataclass
class Candidate:
    storage: Storage
    a: int            # last use before the gap (-1: the iteration's start)
    b: int            # first use after it
    nbytes: int
    state: bool       # host-held state: also its next value's copy to the host after the update


def candidates(stores: list[Storage]) -> list[Candidate]:
    out = []
    for st in stores:
        if st.pinned:        # state: host-held instead of resident (then its gaps too, below)
            out.append(Candidate(st, -1, st.steps[0], st.nbytes, True))
        ss = st.steps
        out.extend(Candidate(st, ss[i], ss[i + 1], st.nbytes, False)
                   for i in range(len(ss) - 1) if ss[i + 1] - ss[i] > 2)
    return out
