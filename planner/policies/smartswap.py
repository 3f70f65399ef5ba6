"""``smartswap``: SmartSwap's policy generator (004 Section 4) and its release points (Section 5.2).

SmartSwap plans from what a lightweight profiler can see, the operator sequence, the
memory trace and the iteration's duration, never per-operator times:

- logical layers (Eq. 1): the forward, backward and optimizer operators are each grouped
  evenly (``LAYERS`` groups per phase); a group's time is T_iter / N_iter * N_group, where
  T_iter is the iteration's time (the profile's total) and N the operator counts;
- the memory reduction list (4.2): the steps where the memory trace without swaps
  (``engine.liveness``, in-place chains as one storage) exceeds the pool, each with the
  bytes to shed (an MRE);
- the candidate list (4.3): a tensor's stay between two consecutive uses (for an
  activation, its last forward use and its first backward use; for state, the stretch
  outside the update, which makes it host-held instead of resident) whose span covers at
  least one MRE, scored by Eq. 2: normalised MREs covered + C x normalised size;
- the simulator (4.4): candidates by descending score; Eq. 3, T_swap = S / B; the swap-in is
  pre-triggered at the start of the latest logical layer before the first use (searching
  backward) with T_remaining > T_swap, as long as that is after the peak it relieves; the
  swap-out completes in the first layer from its last use with T_remaining > T_swap. Rounds
  repeat until no MRE is left (Algorithm 2).

Release points (5.2): the simulator knows the operator during which a swap-out finishes, so
the copy's device bytes go back to the pool right after it (the next tenant of those bytes
waits on the swap-out's event, which the simulator says has already fired), instead of
staying held until the next synchronization (the iteration's end); ``reuse_intervals`` gives
both (004 Figure 6b).

Placement: each stay on the device (from its swap-in or first write to its release point) is
one object of the online allocator (``allocator.bestfit``, PyTorch's caching allocator, or
``va``), asked for and given back in step order through ``planner.online_program`` (which
the window and lms policies share): its reuse edges make the first write into reused bytes
wait for everything that used them, the swap-out at a release point included, so the Program
verifies whatever the real copy times; the simulator's times only decide how early bytes are
reused. When a stay finds no room (fragmentation), Algorithm 2 sheds to a lower target.
"""
from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from engine.graph_io import fingerprint
from engine.ir import Graph, Kind, PERSISTENT_KINDS
from engine.liveness import live_bytes_per_step
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT, Arena, Instr, Program

from ..errors import PlanError
from ..online_program import OnlineProgram, online_allocator
from ..policy import PlanRequest, Policy, register

# Logical layers per phase. 004 Figure 3: the groups' time varies little once there are at most as
# many as the model's layers (32 in its Llama2). Measured at 1/4 of the peak (simulated s, 7B micro-steps
# at 2048/1536/1024 tokens): 16 per phase 30.21/21.06/14.25, 24: 29.37/20.56/13.84, 32: 29.20/20.73/13.82,
# 48: 30.01/20.65/13.91; GPT-2 XL within 1.5% for all.
LAYERS = 32
# Eq. 2's weight of size against MREs covered. The paper gives no value; measured on the largest
# micro-step of GPT-2 XL and the 7B preset at 1/4 of their peak (bench/results/smartswap_*.txt),
# C = 0, 0.25, 0.5, 1, 2, 4: 12.79, 12.72, 12.60, 12.56, 12.50, 12.52 s and 29.20, 29.20, 32.72,
# 32.02, 32.04, 31.90 s. 0.25 is the best on the 7B (by 9% over C >= 0.5) and 1.7% from GPT-2
# XL's best.
C_DEFAULT = 0.25
FIRST_TARGET = 0.97  # of the pool: Algorithm 2's first target (the allocator needs some slack)
TARGET_STEP = 0.05   # lowered by this much of the pool while a stay finds no room
TRIES = 12
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


def score(mres: np.ndarray, sizes: np.ndarray, c: float) -> np.ndarray:
    """Eq. 2: MREs covered and size, each normalised by its largest value, size weighted by C."""
    m = mres / mres.max() if len(mres) and mres.max() > 0 else np.zeros(len(mres))
    s = sizes / sizes.max() if len(sizes) and sizes.max() > 0 else np.zeros(len(sizes))
    return m + c * s


def swap_seconds(nbytes: int, bytes_per_s: float) -> float:
    """Eq. 3: T_swap = S / B."""
    return nbytes / bytes_per_s if bytes_per_s > 0 else 0.0


class Simulator:
    """004 Section 4.4 over the logical layers: each layer's time left for copies, one budget per
    direction (a swap-in and a swap-out run on separate copy streams; the link is full duplex)."""

    def __init__(self, layers: Layers, bytes_per_s: float, d2h_bytes_per_s: float | None = None):
        self.layers = layers
        self.bw = {True: bytes_per_s, False: bytes_per_s if d2h_bytes_per_s is None else d2h_bytes_per_s}
        self.remaining = {True: layers.seconds.copy(), False: layers.seconds.copy()}   # by inbound

    def swap_out_release(self, last_use: int, nbytes: int) -> tuple[int, int]:
        """(step during which the swap-out issued after ``last_use`` completes, its layer): the
        first layer from last_use's on with T_remaining > T_swap; (-1, -1) if none."""
        ly, t, left = self.layers, swap_seconds(nbytes, self.bw[False]), self.remaining[False]
        for k in range(ly.of_step[last_use], ly.count):
            if left[k] > t:
                used = ly.seconds[k] - left[k] + t          # the copy stream's work in this layer
                start = ly.first[k] if k != ly.of_step[last_use] else last_use + 1
                r = max(start, ly.first[k] + math.ceil(used / ly.op_seconds) - 1) if ly.op_seconds > 0 else start
                return int(min(r, ly.last[k])), k
        return -1, -1

    def swap_in_trigger(self, first_use: int, not_before: int, nbytes: int) -> tuple[int, int]:
        """(step at whose start the swap-in for ``first_use`` is issued, its layer): searching
        backward from the layer before first_use's for one with T_remaining > T_swap whose
        start is after ``not_before``; (-1, -1) if none."""
        ly, t, left = self.layers, swap_seconds(nbytes, self.bw[True]), self.remaining[True]
        for k in range(ly.of_step[first_use] - 1, -1, -1):
            if ly.first[k] <= not_before:
                break
            if left[k] > t:
                return int(ly.first[k]), k
        return -1, -1

    def take(self, layer: int, nbytes: int, inbound: bool = True) -> None:
        self.remaining[inbound][layer] -= swap_seconds(nbytes, self.bw[inbound])


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

    def content(self, step: int) -> int:
        """The tensor this storage holds after ``step``: the last written up to it."""
        done = [k for k in self.writes if k <= step]
        return self.writes[max(done)] if done else self.root


def _storages(g: Graph, order, lt) -> list[Storage]:
    owns, _ = lt.storage()
    root = np.arange(len(g.tensors))
    merged = np.nonzero(~owns)[0]
    for t in merged[np.argsort(lt.start[merged], kind="stable")]:
        root[t] = root[lt.inplace_of[t]]
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


def _candidates(stores: list[Storage]) -> list[Candidate]:
    out = []
    for st in stores:
        if st.pinned:        # state: host-held instead of resident (then its gaps too, below)
            out.append(Candidate(st, -1, st.steps[0], st.nbytes, True))
        ss = st.steps
        out.extend(Candidate(st, ss[i], ss[i + 1], st.nbytes, False)
                   for i in range(len(ss) - 1) if ss[i + 1] - ss[i] > 2)
    return out


class SmartSwapPlan:
    """The decisions for one graph (which stays leave the device, when they come back), then
    the Program. ``c``: Eq. 2's C."""

    def __init__(self, request: PlanRequest, c: float = C_DEFAULT, per_phase: int = LAYERS):
        self.request = request
        self.g, self.facts, self.budget = request.graph, request.facts, request.budget
        self.order = list(self.facts.order)
        g, n = self.g, len(self.order)
        secs = request.op_seconds
        self.iteration_seconds = float(np.sum(secs)) if secs is not None else float(n)
        link = request.profile.link if request.profile is not None else None
        self.bw = link.h2d_bytes_per_s if link else math.inf
        self.bw_out = link.d2h_bytes_per_s if link else math.inf
        self.phase = phases(g, self.order)
        self.layers = logical_layers(self.phase, self.iteration_seconds, per_phase)
        self.c = c
        self.trace = live_bytes_per_step(g, self.order, self.facts.lifetimes).astype(np.int64)
        self.pool = int(self.budget.pool_bytes)

    # ------------------------------------------------------------------ policy generation
    def decide(self, limit: int) -> list[Storage]:
        """Algorithm 2 at ``limit`` pool bytes: storages with their gaps chosen."""
        g, n = self.g, len(self.order)
        stores = _storages(g, self.order, self.facts.lifetimes)
        state_cur = {c for c, _ in g.state_pairs}      # weights no operator updates are their own next value
        self.unchanged = {c for c, x in g.state_pairs if c == x}
        live = self.trace.copy()
        sim = Simulator(self.layers, self.bw, self.bw_out)
        for st in stores:
            if st.host_leaf and st.root in state_cur and (st.writes or st.root in self.unchanged):
                st.pinned = True            # resident state (updated in place or not): stays unless chosen
            elif st.host_leaf:               # inputs, parameters read only: fetched before first use
                p, k = sim.swap_in_trigger(st.steps[0], -1, st.nbytes)
                if p < 0:
                    p = self.layers.first[self.layers.of_step[st.steps[0]]]
                else:
                    sim.take(k, st.nbytes)
                st.gaps.append((-1, st.steps[0], -1, p))
                live[:p] -= st.nbytes
        root_of = _root_map(g, self.facts.lifetimes)
        by_root = {st.root: st for st in stores}
        for cur, nxt in g.state_pairs:     # next values not written over their state: to the host
            st = by_root.get(int(root_of[nxt]))
            if cur != nxt and st is not None and int(root_of[cur]) != st.root:
                r, k = sim.swap_out_release(st.steps[-1], st.nbytes)
                if k >= 0:
                    sim.take(k, st.nbytes, inbound=False)
                else:
                    r = self._latency_release(st.steps[-1], st.nbytes, n)
                st.copy_out_at_end, st.end_release = True, r
                live[st.end_release + 1:] -= st.nbytes
        cands = _candidates(stores)
        forced = False
        for _ in range(64):                                    # rounds of Algorithm 2
            excess = live - limit
            if not (excess > 0).any() or not cands:
                break
            over = np.concatenate(([0], np.cumsum(excess > 0)))
            mres = np.array([over[c.b] - over[c.a + 1] if not c.state else over[c.b] + over[n] - over[c.storage.steps[-1] + 1]
                             for c in cands], dtype=float)
            keep = mres > 0
            cands = [c for c, k in zip(cands, keep) if k]
            if not cands:
                break
            scores = score(mres[keep], np.array([c.nbytes for c in cands], dtype=float), self.c)
            progress, rest = False, []
            # Ties (equal sizes and MREs, as an optimizer's state tensors) go first to candidates
            # whose host copy is current, which need no copy back.
            copies = np.array([self._copies_back(c) for c in cands])
            for i in np.lexsort((copies, -scores)):
                cand = cands[i]
                if not (live - limit > 0).any():
                    rest.append(cand)
                    continue
                if self._apply(cand, sim, live, limit, n, forced):
                    progress = True
                else:
                    rest.append(cand)
            cands = rest
            if not progress:
                if forced:
                    break
                # No candidate has a layer with time left: "schedule the highest-scoring candidate
                # within its previous logical layer, accepting some latency" (4.4.1), for all of them.
                forced = True
        self.shed_trace = live
        return stores

    def _copies_back(self, cand: Candidate) -> bool:
        st = cand.storage
        if cand.state:
            return st.root not in self.unchanged
        return not (st.host_leaf and not any(s <= cand.a for s in st.writes))

    def _latency_release(self, a: int, nbytes: int, b: int) -> int:
        """Without a layer with time left: the copy takes T_swap from its issue after step a."""
        t_op = self.layers.op_seconds
        k = math.ceil(swap_seconds(nbytes, self.bw_out) / t_op) if t_op > 0 else 1
        return min(b - 1, a + max(1, k))

    def _latency_trigger(self, b: int, r: int) -> int:
        """Without a layer with time left: the start of the layer before b's (after step r)."""
        ly = self.layers
        k = max(0, int(ly.of_step[b]) - 1)
        return min(b, max(r + 1, int(ly.first[k])))

    def _apply(self, cand: Candidate, sim: Simulator, live: np.ndarray, limit: int, n: int,
               forced: bool = False) -> bool:
        st, size = cand.storage, cand.nbytes
        if cand.state:
            last = st.steps[-1]
            if st.root in self.unchanged:          # its host copy stays current: no copy back
                r, kr = last, -1
            else:
                r, kr = sim.swap_out_release(last, size)
                if r < 0:
                    if not forced:
                        return False
                    r, kr = self._latency_release(last, size, n), -1
            p, kp = sim.swap_in_trigger(st.steps[0], -1, size)
            if p < 0:
                p = int(self.layers.first[self.layers.of_step[st.steps[0]]])
            if not ((live[:p] > limit).any() or (live[r + 1:] > limit).any()):
                return False
            if kp >= 0:
                sim.take(kp, size)
            if kr >= 0:
                sim.take(kr, size, inbound=False)
            st.pinned = False
            st.gaps.append((-1, st.steps[0], -1, p))
            st.copy_out_at_end = st.root not in self.unchanged
            st.end_release = r
            live[:p] -= size
            live[r + 1:] -= size
            return True
        if st.pinned:            # resident state keeps its object: its gaps wait until it is host-held
            return False
        host_current = st.host_leaf and not any(s <= cand.a for s in st.writes)
        gap_over = np.nonzero(live[cand.a + 1:cand.b] > limit)[0]
        if not len(gap_over):
            return False
        first_over = cand.a + 1 + int(gap_over[0])
        if host_current:
            r, kr = cand.a, -1
        else:
            r, kr = sim.swap_out_release(cand.a, size)
            if r < 0 or r >= first_over:      # the copy would finish after the peak it is for
                if not forced:
                    return False
                r, kr = self._latency_release(cand.a, size, cand.b), -1
            if r >= cand.b - 1:
                return False
        over = np.nonzero(live[r + 1:cand.b] > limit)[0]
        if not len(over):
            return False
        peak_end = r + 1 + int(over[-1])        # the swap-in must not start before the peak it relieves
        p, kp = sim.swap_in_trigger(cand.b, peak_end, size)
        if p < 0 and forced:
            p, kp = self._latency_trigger(cand.b, peak_end), int(self.layers.of_step[min(cand.b, n - 1)])
        if p < 0 or p > cand.b or not (live[r + 1:p] > limit).any():
            return False
        sim.take(kp, size)
        if kr >= 0:
            sim.take(kr, size, inbound=False)
        st.gaps.append((cand.a, cand.b, r, p))
        live[r + 1:p] -= size
        return True

    # ------------------------------------------------------------------ the Program
    def program(self, stores: list[Storage], release_at_sync: bool = False, allocator=None) -> Program | None:
        """Walk the steps placing each stay with the online allocator (``planner.online_program``:
        one object per stay, reuse edges from shared bytes, so bytes reused at a release point wait
        for that swap-out) and emit the instructions; None if a stay finds no room.
        ``release_at_sync``: a copied-out stay's bytes are held to the iteration's end (waiting
        for the next synchronization instead of the simulator's release point)."""
        g, order, n = self.g, self.order, len(self.order)
        kept = {nxt for cur, nxt in g.state_pairs if cur != nxt} | ({g.loss} if g.loss is not None else set())
        stays = self.stays = _stays(stores, n, kept, release_at_sync)
        alloc = allocator if allocator is not None else self.allocator()
        resident = [st.storage.root for st in stays if st.start < 0]
        try:
            op = OnlineProgram(g, alloc, self.budget.scratch_bytes, order, POLICY.name, resident)
        except PlanError:
            return None
        starts: dict[int, list[Stay]] = {}
        outs: dict[int, list[Stay]] = {}
        frees: dict[int, list[Stay]] = {}
        for st in sorted(stays, key=lambda st: st.first_use):   # at one step, the most urgent copy first
            if st.start >= 0:
                starts.setdefault(st.start, []).append(st)
            if st.out_after is not None:
                outs.setdefault(st.out_after, []).append(st)
            frees.setdefault(st.free_after, []).append(st)
        holds: dict[int, int] = {r: r for r in resident}   # storage root -> the tensor it holds now
        root_of = _root_map(g, self.facts.lifetimes)
        for step in range(n):
            for st in frees.pop(step - 1, []):
                op.drop(holds.pop(st.storage.root))
            for st in starts.get(step, []):
                if st.swap_in is not None:
                    o = op.place(st.swap_in)
                    if o is None:
                        return None
                    op.swap_in(st.swap_in, o)
                    holds[st.storage.root] = st.swap_in
            node = g.nodes[order[step]]
            out_objs = []
            for t in node.outputs:
                r = int(root_of[t])
                if r != t:                           # written over its storage's input, in place
                    out_objs.append(op.obj_of[holds[r]])
                else:
                    o = op.place(t)
                    if o is None:
                        return None
                    out_objs.append(o)
            starts.pop(step, None)
            op.compute(step, node.id, out_objs)
            for t in node.outputs:
                holds[int(root_of[t])] = t
            for t in node.inputs:
                holds.setdefault(int(root_of[t]), t)
            for st in outs.pop(step, []):
                if st.copy_out:
                    op.write_back(holds[st.storage.root])
        if op.leave_state():
            raise PlanError(f"smartswap: resident state strayed from its home in '{g.name}' (planner bug)")
        self.allocator_used = alloc
        return op.program()

    def allocator(self):
        """The request's online allocator over the pool (bestfit unless it names va)."""
        return online_allocator(self.request, "bestfit")

    def make(self) -> Program:
        """Algorithm 2, then placement; while a stay finds no room (the allocator fragments the
        pool), Algorithm 2 again at a target lowered by ``TARGET_STEP`` of the pool, at most
        ``TRIES`` times; PlanError if it never fits."""
        target = FIRST_TARGET
        for _ in range(TRIES):
            self.target = target
            self.stores = self.decide(int(self.pool * target))
            prog = self.program(self.stores)
            if prog is not None:
                return prog
            target -= TARGET_STEP
        raise PlanError(f"smartswap could not fit '{self.g.name}' in a pool of {self.pool} bytes "
                        f"(shed down to {target + TARGET_STEP:.2f} of it); give a larger --memory")

    def arena_needed(self, release_at_sync: bool) -> int:
        """The most bytes the stays of the last ``make`` hold at once (requested, before the
        allocator's rounding), releasing at the simulator's points or at the next
        synchronization (after ``make``)."""
        from allocator.online import make_online_allocator
        alloc = make_online_allocator("bestfit", 1 << 62)
        self.program(self.stores, release_at_sync, alloc)
        return int(alloc.stats().peak_requested_bytes)


@dataclass(eq=False)
class Stay:
    """One stay of a storage on the device. Its bytes are taken before step ``start`` (-1:
    resident state, before the iteration) by a swap-in of ``swap_in`` or by the compute that
    first writes it, and given back after step ``free_after`` (the release point; beyond the
    last step: never). ``out_after``: the step after which a swap-out ends it (None: no swap-out),
    copying to the host if ``copy_out``."""
    storage: Storage
    nbytes: int
    start: int
    swap_in: int | None
    out_after: int | None
    free_after: int
    copy_out: bool = False
    first_use: int = 0            # the first step that uses it


def _stays(stores: list[Storage], n: int, kept: set, release_at_sync: bool) -> list[Stay]:
    out = []
    for st in stores:
        if st.pinned:
            out.append(Stay(st, st.nbytes, -1, None, None, n, first_use=st.steps[0]))
            continue
        begin, swap_in, copied = st.steps[0], None, None
        for a, b, r, p in sorted(st.gaps):
            if a >= 0:
                content = st.content(a)
                copy = not (st.host_leaf and content == st.root) and content != copied
                release = n - 1 if release_at_sync and copy else r
                out.append(Stay(st, st.nbytes, begin, swap_in, a, release, copy, _use_from(st, begin)))
                copied = content if copy else copied
                swap_in = content
            else:
                swap_in = st.root
            begin = p
        last = st.steps[-1]
        if st.copy_out_at_end:
            release = n - 1 if release_at_sync else st.end_release
            out.append(Stay(st, st.nbytes, begin, swap_in, last, release, True, _use_from(st, begin)))
        else:
            members = set(st.writes.values()) | {st.root}
            out.append(Stay(st, st.nbytes, begin, swap_in, None, n if members & kept else last, False,
                            _use_from(st, begin)))
    return out


def _use_from(st: Storage, step: int) -> int:
    """The first step at or after ``step`` that uses the storage."""
    k = bisect.bisect_left(st.steps, max(step, 0))
    return st.steps[min(k, len(st.steps) - 1)]


def _root_map(g: Graph, lt) -> np.ndarray:
    owns, _ = lt.storage()
    root = np.arange(len(g.tensors))
    merged = np.nonzero(~owns)[0]
    for t in merged[np.argsort(lt.start[merged], kind="stable")]:
        root[t] = root[lt.inplace_of[t]]
    return root


def make(request: PlanRequest) -> Program:
    """``request.policy_options``: ``c`` (Eq. 2's C, default C_DEFAULT), ``layers`` (per phase)."""
    opts = request.policy_options
    return SmartSwapPlan(request, float(opts.get("c", C_DEFAULT)), int(opts.get("layers", LAYERS))).make()


POLICY = register(Policy("smartswap", "SmartSwap: logical layers, Eq. 2 candidates, simulated swap timing "
                         "and release points (no search), online allocator", make, allocators=("bestfit", "va")))


@dataclass(frozen=True)
class ReleaseReport:
    """004 Section 5.2 / Figure 6b for one plan: per copied-out stay, the operators between its
    swap-out's issue and the reuse of its bytes, at the simulator's release point and when
    waiting for the next synchronization (the iteration's end); the pool each way needs."""
    simulator: np.ndarray
    at_sync: np.ndarray
    arena_bytes: int
    arena_bytes_at_sync: int


def release_report(plan: SmartSwapPlan) -> ReleaseReport:
    """Call after ``plan.make()``."""
    n = len(plan.order)
    kept = {x for c, x in plan.g.state_pairs if c != x} | ({plan.g.loss} if plan.g.loss is not None else set())
    ours = [st for st in _stays(plan.stores, n, kept, False) if st.copy_out]
    sync = [st for st in _stays(plan.stores, n, kept, True) if st.copy_out]
    return ReleaseReport(np.array([st.free_after - st.out_after for st in ours], dtype=np.int64),
                         np.array([st.free_after - st.out_after for st in sync], dtype=np.int64),
                         plan.arena_needed(False), plan.arena_needed(True))
