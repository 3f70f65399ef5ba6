"""``tflms``: TFLMS as published (Le et al., "TFLMS: Large Model Support in TensorFlow by Graph
Rewriting", arXiv 1807.02037: the "TFLMS [26]" of SwapAdvisor's Figure 7, by its name; our copy of
the paper has no reference list), with the defaults of IBM's code and its graph-rewriting rules,
nothing tuned: the baseline as the paper ran it, beside ``lms`` (planner.policies.lms), whose two
thresholds are tuned on our simulator.

Modelled on IBM/tensorflow-large-model-support, branch ``tflmsv1``,
``tensorflow_large_model_support/lms.py`` (class ``LMS``) and ``topos.py`` (class ``TOPOS``):

- Defaults (``LMS.__init__``): ``n_tensors=-1`` (every candidate swapped), ``lb=1``, ``ub=10000``,
  ``ctrld_strategy="chain_rule"``, ``fuse_swapins=False`` (one swap-in per backward consumer).
  There is no swap-out threshold in this version: every forward tensor a backward operator reads
  is swapped (``LMS._insert_swap_nodes``), however close that reader is.
- Levels (``TOPOS.build``): the ``toposort`` layers of the graph (a node's level is its longest
  path from the start); a backward node sharing a level with a forward node loses its level
  (``_clean_bw_ops``: order -1), the optimizer's updates are removed (``_clean_update_ops``);
  the backward phase starts at the first level holding a backward node.
- Which tensors (``LMS._insert_swap_nodes``): each output of a forward operator whose type is not
  in ``ATOMIC_TYPES`` (Const, Mul, Add, Identity, Assign, VariableV2, Reshape, Shape, ShapeN,
  Placeholder), read by a backward operator that has a level and outputs someone reads. So no
  variable, optimizer state, input or label moves (they are VariableV2/Assign/Placeholder: our
  leaves and the updates' outputs), nor the output of our ``add``, ``mul`` and ``reshape``
  (TensorFlow's Add, Mul, Reshape; our other operators have no counterpart in the list). This
  version does not skip tensors of one dimension or fewer: that rule (``ndims <= 1``) and
  ``swapout_threshold``/``swapin_ahead``/``swapin_groupby``/``sync_mode`` belong to the later
  TFLMSv2 (master from 2018-10), whose first defaults took half the levels as the threshold and
  chained the swap-ins (commit 1c49ca3: ``version="v2"``, planner.policies.tflms_v2) and whose
  later ones auto-tune on TFLMS's own memory simulator (4ce78b3 on, ``_search_params``: not
  modelled).
- Swap-out (``_add_swapout``): an identity on the host fed by the tensor as soon as it is made;
  the device copy lives until its last forward reader. Here: the host copy is made right after
  the producing step and the memory freed after the last use before a swapped-in reader.
- Swap-in (``_add_swapin``, ``_add_control_dependency``, ``_do_chain_rule``,
  ``_do_direct_order``): one per backward reader, triggered by a control edge from a backward
  operator found by the chain rule: walk forward from the producer through forward operators,
  level by level of graph distance; from distance ``lb`` on, the backward operators reading
  those operators' outputs whose level lies strictly between the producer's and the reader's are
  the candidates; the first distance with one wins (``ub`` caps the walk). A reader within
  ``lb`` levels of the backward phase's start uses the direct order instead: the latest level in
  [reader - ub, reader - lb) after the producer with an operator that reaches the reader. No
  candidate: no control edge, the swap-in starts as soon as the swap-out is done.

What is approximated, and why:
- TensorFlow runs the rewritten graph dynamically; we run the request's schedule. A swap-in is
  placed after its control operator's step (or right before its reader if that operator comes
  later in our schedule), which is the edge TFLMS adds.
- ``next(iter(set))`` picks one candidate arbitrarily (Python's set order); we take the latest in
  the schedule, the nearest to the reader, as ``lb`` means ("swapped in at least lb nodes before
  it"), and deterministic. (The earliest would start swap-ins blocks ahead through residual
  connections: WResNet-152-4 at batch 64 then runs out of 16 GiB, which the paper's TFLMS did not.)
- Two swap-ins of one tensor whose lives overlap (a second reader's control operator runs before
  the first reader) are one stay here: the tensor stays on the device between its readers.
- A backward reader without a level (``_find_new_src_op``: TFLMS then swaps other tensors
  further on) keeps reading the device copy; ``n_tensors`` counts producers in schedule order
  where TFLMS walks breadth first from its seed operators.

``policy_options``: ``lb``, ``ub``, ``n_tensors`` override a default; ``version="v2"`` plans with
TFLMSv2's first defaults instead (planner.policies.tflms_v2), for comparison.

Out of memory is one line (LmsOutOfMemory), as for lms: the "x" in the papers' tables.
"""
from __future__ import annotations

from dataclasses import dataclass

from allocator.registry import ONLINE
from engine.ir import Graph, Kind

from ..errors import PlanError
from ..online_program import StepFacts
from ..policy import PlanRequest, Policy, register
from .lms import SwapPoints, plan_swap_points
from .tflms_graph import Phases, reaches
from .tflms_v2 import PUBLISHED_V2, TflmsV2Settings

# TFLMS v1's ATOMIC_TYPES with a counterpart among our operators (Const, Identity, Assign,
# VariableV2, Shape, ShapeN and Placeholder make leaves or nothing here).
EXCLUDED_OPS = frozenset({"add", "mul", "reshape"})


@dataclass(frozen=True)
class TflmsSettings:
    """TFLMS v1's knobs; the defaults are ``LMS.__init__``'s."""
    lb: int = 1
    ub: int = 10000
    n_tensors: int = -1               # -1: every candidate; 0: LMS off

    def describe(self) -> str:
        return f"lb={self.lb}, ub={self.ub}, n_tensors={self.n_tensors}"

    def points(self, g: Graph, steps: StepFacts) -> SwapPoints:
        return swap_points(g, steps, self)


PUBLISHED = TflmsSettings()


def _has_readers(g: Graph, ph: Phases, nid: int) -> bool:
    """TFLMS skips backward readers with no outgoing operators (TensorFlow may prune them)."""
    return any(ph.readers[t] for t in g.nodes[nid].outputs)


def chain_rule(g: Graph, ph: Phases, fw: int, bw: int, lb: int, ub: int, first) -> int:
    """``LMS._do_chain_rule``: the control operator of the swap-in of ``fw``'s output for backward
    reader ``bw``, or -1. ``first`` picks one of several candidates."""
    fw_order, bw_order = ph.level[fw], ph.level[bw]
    if bw_order - lb <= fw_order:       # LMS._add_control_dependency: lb out of range
        lb = 1
    if bw_order - lb < ph.bw_start:
        return direct_order(g, ph, fw, bw, lb, ub, first)
    frontier, seen = [fw], {fw}
    lower, upper = lb, ub
    while frontier:
        if upper == 0 or lower > upper:
            break
        found, nxt = [], []
        for op in frontier:
            consumers = ph.consumers(g, op)
            if lower <= 0:
                found += [c for c in consumers if ph.backward[c] and fw_order < ph.level[c] < bw_order]
            for c in consumers:
                if not ph.backward[c] and c not in seen:
                    seen.add(c)
                    nxt.append(c)
        if found:
            return first(found)
        lower, upper = lower - 1, upper - 1
        frontier = nxt
    return -1


def direct_order(g: Graph, ph: Phases, fw: int, bw: int, lb: int, ub: int, first) -> int:
    """``LMS._do_direct_order``: the latest level in [bw - ub, bw - lb), after ``fw``'s, holding an
    operator from which ``bw`` is reachable; one of them, or -1."""
    fw_order, bw_order = ph.level[fw], ph.level[bw]
    for level in range(bw_order - lb - 1, max(bw_order - ub, fw_order + 1) - 1, -1):
        cands = [op for op in ph.by_level.get(level, ()) if reaches(g, ph, op, bw)]
        if cands:
            return first(cands)
    return -1


def swapped_readers(g: Graph, ph: Phases, t: int) -> list[int]:
    """The backward readers of activation ``t`` that TFLMS v1 gives a swap-in ([] if ``t`` stays)."""
    p = g.producer[t]
    if p < 0 or not ph.forward[p] or g.nodes[p].op in EXCLUDED_OPS or g.tensors[t].kind != Kind.ACTIVATION:
        return []
    # a swap-out only where some backward reader has a level (and readers of its own)
    return [r for r in ph.readers[t] if ph.backward[r] and ph.level[r] >= 0 and _has_readers(g, ph, r)]


def swap_points(g: Graph, steps: StepFacts, settings: TflmsSettings = PUBLISHED) -> SwapPoints:
    """TFLMS v1's rewriting as swap points on the schedule ``steps`` runs in."""
    position = {nid: pos for pos, nid in enumerate(steps.schedule)}
    ph = Phases(g, steps.schedule)
    first = (lambda cands: max(cands, key=position.__getitem__))
    points = SwapPoints.none(len(steps.schedule))
    if settings.n_tensors == 0:          # LMS off
        return points
    swapped = 0
    for nid in steps.schedule:
        for t in g.nodes[nid].outputs:
            readers = swapped_readers(g, ph, t)
            if not readers:
                continue
            if 0 < settings.n_tensors <= swapped:
                return points
            swapped += 1

            def start_of(a: int, b: int, nid=nid) -> int:
                # after the control operator's step (no operator: right after the swap-out), never
                # after the reader's own step (the control operator runs later in our schedule)
                ctrl = chain_rule(g, ph, nid, steps.schedule[b], settings.lb, settings.ub, first)
                return min(b, position[ctrl] + 1) if ctrl >= 0 else a + 1
            # a reader not in the set reads the device copy: the tensor stays for it
            points.add_tflms_swaps(t, steps.uses[t], {position[r] for r in readers}, start_of)
    return points


def settings_of(request: PlanRequest):
    """The published defaults of ``version`` (``policy_options``; "v1", the paper's, unless told;
    "v2": TFLMSv2's first defaults, planner.policies.tflms_v2), each knob overridable by name."""
    opts = dict(request.policy_options or {})
    version = str(opts.get("version", "v1"))
    if version == "v2":
        return TflmsV2Settings(*(int(opts.get(k, getattr(PUBLISHED_V2, k)))
                                 for k in ("swapout_threshold", "swapin_groupby", "swapin_ahead")))
    if version != "v1":
        raise PlanError(f"tflms: unknown version '{version}' (v1: TFLMS as the paper cited it; v2: TFLMSv2's "
                        "first defaults)")
    return TflmsSettings(*(int(opts.get(k, getattr(PUBLISHED, k))) for k in ("lb", "ub", "n_tensors")))


def plan_tflms(request: PlanRequest, settings=PUBLISHED):
    """TFLMS's Program with ``settings`` (v1's published defaults unless told; a TflmsV2Settings
    for v2); LmsOutOfMemory, one line, where it does not fit."""
    g = request.graph
    order = list(request.schedule if request.schedule is not None else request.facts.order)
    steps = StepFacts(g, order)
    return plan_swap_points(request, order, steps, settings.points(g, steps), POLICY.name,
                            f"tflms ({settings.describe()})")


def make(request: PlanRequest):
    return plan_tflms(request, settings_of(request))


POLICY = register(Policy("tflms", "TFLMS as published (v1 defaults lb=1, every forward tensor a backward op reads "
                         "swapped, chain-rule control edges), online allocator", make, kinds=(ONLINE,)))
