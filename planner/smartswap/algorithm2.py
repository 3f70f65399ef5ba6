"""004 Algorithm 2 at one memory target: which stays leave the device and when they come back.

From the memory trace without swaps (in-place chains as one storage), the memory reduction
list is every step above the target; candidates (``candidates``) covering at least one of
those steps are scored by Eq. 2 and taken by descending score, each timed by the layer
simulator (Eq. 3): the swap-in pre-triggered at the start of the latest logical layer before
the first use with time left (after the peak it relieves), the swap-out completing in the
first layer from the last use with time left. Rounds repeat until no step is above the target.
"""
from __future__ import annotations

import math

import numpy as np

from engine.ir import Graph

from .candidates import Candidate, Storage, candidates, root_map, score, storages
from .layer_simulator import Simulator, swap_seconds
from .layers import Layers

ROUNDS = 64
# Storages under this share of the memory target stay where they are (biases, norms' scales and
# their accumulators: a transformer layer's small tensors). Moving one saves next to nothing,
# and its swap-in, waiting for the bytes it reuses, holds up the copies queued behind it. Measured
# (bench.smartswap's 7B stream, micro-steps of 1536/2048/1024 tokens, simulated s): every storage
# a candidate 20.24/30.76/13.27; none under 1, 16 or 11 MiB (this share) 18.68/26.64/11.53.
SMALLEST_SHARE = 2 ** -12
# ...nor storages the link moves in under this share of its fixed cost per copy (3.75 KB at 12 GB/s
# and 10 us): each such copy is nearly all fixed cost, and a small model's stream of them fills the
# link (gpt-tiny at half its peak: 67 swap-ins where SwapAdvisor's plan needs 38). Measured on
# bench.smartswap's gpt-tiny stream (micro-steps of 12/16/8 tokens, simulated us): none below the
# share above 885/863/828; below 1/32 of the fixed cost 807/836/801; 1/16: 809/836/790; 1/8 does not
# fit. Where leaving them out cannot reach the target, they are candidates again.
SMALLEST_COPY_SHARE = 1 / 32


class Algorithm2:
    """The decisions for one graph and schedule; ``run(limit)`` makes them at ``limit`` bytes."""

    def __init__(self, g: Graph, order: list[int], lifetimes, layers: Layers, trace: np.ndarray,
                 bw_in: float, bw_out: float, c: float, latency_s: float = 0.0):
        self.g, self.order, self.lifetimes, self.layers = g, order, lifetimes, layers
        self.trace, self.bw_in, self.bw_out, self.c, self.latency_s = trace, bw_in, bw_out, c, latency_s
        self.unchanged = {cur for cur, nxt in g.state_pairs if cur == nxt}   # weights no operator updates
        self._start = None          # what every run starts from (``_fetched_and_sent``)...
        self._start_link = None     # ...for these link figures

    def run(self, limit: int, extra: np.ndarray | None = None) -> tuple[list[Storage], np.ndarray]:
        """(storages with their gaps chosen, the memory trace left) at ``limit`` pool bytes;
        ``extra``: bytes per step to shed beyond the trace (held longer by later release points).
        Small storages are no candidates (``SMALLEST_SHARE``, ``SMALLEST_COPY_SHARE``) unless
        the target cannot be reached without them."""
        share = limit * SMALLEST_SHARE
        fixed = self.latency_s * min(self.bw_in, self.bw_out) * SMALLEST_COPY_SHARE if self.latency_s > 0 else 0.0
        stores, live = self._run(limit, extra, max(share, fixed))
        if fixed > share and (live > limit).any():
            stores, live = self._run(limit, extra, share)
        return stores, live

    def _run(self, limit: int, extra: np.ndarray | None, smallest: float) -> tuple[list[Storage], np.ndarray]:
        n = len(self.order)
        stores, sim, live = self._fetched_and_sent()
        if extra is not None:
            live += extra
        cands = [c for c in candidates(stores) if c.nbytes >= smallest]
        # Per candidate: the steps whose excess it covers are over[b] - over[a + 1] (state: before
        # its first use and after its last, over[b] + over[n] - over[last + 1]).
        a = np.array([c.a for c in cands], dtype=np.int64)
        b = np.array([c.b for c in cands], dtype=np.int64)
        state = np.array([c.state for c in cands], dtype=bool)
        last = np.array([c.storage.steps[-1] for c in cands], dtype=np.int64)
        sizes = np.array([c.nbytes for c in cands], dtype=float)
        # Ties (equal sizes and MREs, as an optimizer's state tensors) go first to candidates
        # whose host copy is current, which need no copy back.
        copies = np.array([self._copies_back(c) for c in cands], dtype=bool)
        left = np.arange(len(cands))         # the candidates not applied yet, in the order tried last
        forced = False
        for _ in range(ROUNDS):
            excess = live - limit
            if not (excess > 0).any() or not len(left):
                break
            over = np.concatenate(([0], np.cumsum(excess > 0)))
            mres = np.where(state[left], over[b[left]] + over[n] - over[last[left] + 1],
                            over[b[left]] - over[a[left] + 1]).astype(float)
            covers = mres > 0
            keep = left[covers]
            if not len(keep):
                break
            scores = score(mres[covers], sizes[keep], self.c)
            progress, rest, above = False, [], True     # above: a step is over the target (only an apply changes it)
            for i in keep[np.lexsort((copies[keep], -scores))]:
                if above and self._apply(cands[i], sim, live, limit, n, forced):
                    progress, above = True, bool((live > limit).any())
                else:
                    rest.append(i)
            left = np.array(rest, dtype=np.int64)
            if not progress:
                if forced:
                    break
                # No candidate has a layer with time left: "schedule the highest-scoring candidate
                # within its previous logical layer, accepting some latency" (4.4.1), for all of them.
                forced = True
        return stores, live

    def _fetched_and_sent(self) -> tuple[list[Storage], Simulator, np.ndarray]:
        """What every target starts from, fresh for each run: the storages, the layer simulator
        and the memory trace after the copies every plan makes (inputs and parameters read only,
        fetched before their first use; next values not written over their state, sent to the
        host). It depends only on the link's figures, so it is made once per setting of them
        and copied (the make loop lowers the target at one setting: a third of each run's work
        on rnn-8-8k); a copy shares its storages' steps and writes, which nothing changes."""
        link = (self.bw_in, self.bw_out, self.latency_s)
        if self._start is None or self._start_link != link:
            self._start, self._start_link = self._fetch_and_send(), link
        stores, sim, live = self._start
        fresh = [st.afresh() for st in stores]
        return fresh, sim.copy(), live.copy()

    def _fetch_and_send(self) -> tuple[list[Storage], Simulator, np.ndarray]:
        g, n = self.g, len(self.order)
        stores = storages(g, self.order, self.lifetimes)
        state_cur = {c for c, _ in g.state_pairs}
        live = self.trace.copy()
        sim = Simulator(self.layers, self.bw_in, self.bw_out, self.latency_s)
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
        root_of = root_map(g, self.lifetimes)
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
        return stores, sim, live

    def _copies_back(self, cand: Candidate) -> bool:
        st = cand.storage
        if cand.state:
            return st.root not in self.unchanged
        return not (st.host_leaf and not any(s <= cand.a for s in st.writes))

    def _latency_release(self, a: int, nbytes: int, b: int) -> int:
        """Without a layer with time left: the copy takes T_swap from its issue after step a."""
        t_op = self.layers.op_seconds
        k = math.ceil(swap_seconds(nbytes, self.bw_out, self.latency_s) / t_op) if t_op > 0 else 1
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

