"""TFLMSv2's rewriting at its first published defaults, the ``version="v2"`` of policy ``tflms``.

IBM/tensorflow-large-model-support, master at commit 1c49ca3 (2018-11-08, the last before its
auto-tuning, 4ce78b3, replaced these defaults with a search on TFLMS's own memory simulator),
``tensorflow_large_model_support/lms.py``, class ``LMS``:

- Defaults (``LMS.__init__``, ``LMS.run``): ``swapout_threshold=-1``, auto mode: half the levels
  of the topological sort (``self._topo_sort.size//2``); ``swapin_ahead=-1``: the sequential
  strategy; ``swapin_groupby=0``; ``sync_mode=0``.
- Levels (``topos.TOPOS.build``): Kahn layers of the whole graph, nothing removed (our ``depth``).
- Which tensors (``_rewrite_for_swapping``, ``_insert_swap_nodes``): every output of every
  operator not excluded (``_variable_ops``: Assign, Variable...; ``_unused_types``: Const,
  Identity, Placeholder, Fill...: here the optimizer's updates and ``fill``), of more than one
  dimension (``ndims <= 1`` skipped), read by operators more than ``swapout_threshold`` levels
  after its producer, forward or backward alike; readers within ``swapin_groupby`` levels of each
  other share one swap-in (``_groupby``), controlled for the earliest of them.
- Swap-in placement (``_sequential_strategy``, ``_search_by_level``): swap-ins sorted by their
  reader's level; the first level's take ``ahead=3``, each later one ``ahead`` = its reader's
  level minus the previous reader level, so its control operator is searched below the previous
  swap-in's reader: the swap-ins are chained one reader level apart. The control operator: the
  latest level in [max(reader - ahead - 10, producer + 1), reader - ahead) holding an operator
  that reaches the reader; none: the swap-in is synchronised with the reader's other inputs
  (``_sync_swapin``), here right before the reader.

Approximations as for v1 (``planner.policies.tflms``): our fixed schedule, the latest candidate
in it where TFLMS takes any one of a set, one stay per tensor where two swap-ins overlap.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.ir import Graph

from ..online_program import StepFacts
from .lms import SwapPoints
from .tflms_graph import Phases, reaches

FIRST_AHEAD = 3          # _sequential_strategy: "a fixed setting for the first swapins"
SEARCH_SPAN = 10         # _search_by_level: "try at most 10 levels back"
EXCLUDED_OPS = frozenset({"fill"})       # _unused_types' Fill; the updates are _variable_ops


@dataclass(frozen=True)
class TflmsV2Settings:
    swapout_threshold: int = -1      # -1: half the levels
    swapin_groupby: int = 0
    swapin_ahead: int = -1           # -1: the sequential strategy

    def describe(self) -> str:
        return (f"v2: swapout_threshold={self.swapout_threshold}, swapin_groupby={self.swapin_groupby}, "
                f"swapin_ahead={self.swapin_ahead}")

    def points(self, g: Graph, steps: StepFacts) -> SwapPoints:
        return swap_points_v2(g, steps, self)


PUBLISHED_V2 = TflmsV2Settings()


def groupby(levels: list[int], limit: int) -> list[list[int]]:
    """``_groupby``: sorted levels cut where two consecutive ones are more than ``limit`` apart."""
    groups: list[list[int]] = []
    for level in sorted(levels):
        if groups and level - groups[-1][-1] <= limit:
            groups[-1].append(level)
        else:
            groups.append([level])
    return groups


def search_by_level(g: Graph, ph: Phases, src: int, dest: int, ahead: int, at_level) -> int:
    """``_search_by_level``: an operator of the latest level in [max(dest - ahead - 10, src + 1),
    dest - ahead) that reaches ``dest``, or -1."""
    top = ph.depth[dest] - ahead
    for level in range(top - 1, max(top - SEARCH_SPAN, ph.depth[src] + 1) - 1, -1):
        cands = [op for op in at_level.get(level, ()) if reaches(g, ph, op, dest)]
        if cands:
            return cands[-1]            # at_level lists each level's operators in schedule order
    return -1


def swap_records(g: Graph, ph: Phases, steps: StepFacts, threshold: int, limit: int):
    """``_insert_swap_nodes``: (tensor, producer, reader) per swap-in, the reader being the earliest of
    its group, for readers more than ``threshold`` levels after the producer."""
    position = {nid: pos for pos, nid in enumerate(steps.schedule)}
    depth = ph.depth
    swaps = []
    for nid in steps.schedule:
        if ph.update[nid] or g.nodes[nid].op in EXCLUDED_OPS:
            continue
        for t in g.nodes[nid].outputs:
            if len(g.tensors[t].shape) <= 1:
                continue
            far = [r for r in ph.readers[t] if depth[r] - depth[nid] > threshold]
            for group in groupby([depth[r] for r in far], limit):
                earliest = min((r for r in far if depth[r] == group[0]), key=position.__getitem__)
                swaps.append((t, nid, earliest))
    return swaps


def sequential_controls(g: Graph, ph: Phases, swaps, at_level) -> dict[tuple[int, int], int]:
    """``_sequential_strategy``: each swap-in's control operator (or -1), by (tensor, reader)."""
    ctrl = {}
    order = sorted(swaps, key=lambda s: ph.depth[s[2]])
    if not order:
        return ctrl
    first = ph.depth[order[0][2]]
    bound, last = first, first
    for t, p, r in order:
        level = ph.depth[r]
        if level == first:
            ahead = FIRST_AHEAD
        else:
            if level != last:
                bound, last = last, level
            ahead = level - bound
        ctrl[(t, r)] = search_by_level(g, ph, p, r, ahead, at_level)
    return ctrl


def levels_in_order(ph: Phases, schedule) -> dict[int, list[int]]:
    """Each level's operators, in schedule order."""
    at_level: dict[int, list[int]] = {}
    for nid in schedule:
        at_level.setdefault(ph.depth[nid], []).append(nid)
    return at_level


def swap_points_v2(g: Graph, steps: StepFacts, settings: TflmsV2Settings = PUBLISHED_V2) -> SwapPoints:
    """TFLMSv2's rewriting as swap points on the schedule ``steps`` runs in."""
    n = len(steps.schedule)
    position = {nid: pos for pos, nid in enumerate(steps.schedule)}
    ph = Phases(g, steps.schedule)
    at_level = levels_in_order(ph, steps.schedule)
    threshold = settings.swapout_threshold if settings.swapout_threshold >= 0 else (max(ph.depth) + 1) // 2
    swaps = swap_records(g, ph, steps, threshold, settings.swapin_groupby)
    ctrl_of = sequential_controls(g, ph, swaps, at_level) if settings.swapin_ahead < 0 else {
        (t, r): search_by_level(g, ph, p, r, settings.swapin_ahead, at_level) for t, p, r in swaps}
    points = SwapPoints.none(n)
    by_tensor: dict[int, set[int]] = {}
    for t, _, r in swaps:
        by_tensor.setdefault(t, set()).add(position[r])

    def start_of(t: int):
        def start(a: int, b: int) -> int:
            ctrl = ctrl_of[(t, steps.schedule[b])]
            return min(b, position[ctrl] + 1) if ctrl >= 0 else b     # none: synchronised with the reader
        return start
    # a near reader, or a later one of a group, is not in the set: the tensor stays for it
    for t, readers_at in by_tensor.items():
        points.add_tflms_swaps(t, steps.uses[t], readers_at, start_of(t))
    return points
