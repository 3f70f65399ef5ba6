"""``lms``: TensorFlow Large Model Support (Le et al. 2019), the baseline of paper 001 and of
SwapAdvisor's Figure 7, on an online allocator (``bestfit`` by default: TensorFlow's BFC).

Only activations (forward results, ``Kind.ACTIVATION``) are swapped, by distance in
operators along the schedule: between two uses of an activation at steps a < b (its production
counts as a use), when b - a >= ``swapout_threshold`` it is swapped out right after step a
(copied if its host copy is stale) and its memory freed, and swapped back in before step
max(a + 1, b - ``swapin_ahead``), once the operator before that step has finished (TFLMS's
control edge: the swap-in does not start earlier even with room). Everything else (parameters,
optimizer state, gradients, inputs) stays on the device from its first use to its last;
persistent state starts resident and its in-place update leaves the next value in the same
object (a state whose next value strays is planned again from the host, as the swap planner's
double pass does). When memory
runs out the plan fails with one line: that is the "x" in the papers' tables.

The two thresholds are tuned on the simulator, as TFLMS's autotune does: every pair of a
small grid is planned and simulated, and the fastest that fits is kept (``tune``).
"""
from __future__ import annotations

from dataclasses import dataclass

from allocator.registry import ONLINE
from engine.ir import Kind
from engine.units import format_bytes

from ..errors import OutOfRoom, PlanError
from ..online_program import OnlineProgram, StepFacts, fastest, online_allocator, persistent_state, settle
from ..policy import PlanRequest, Policy, register

THRESHOLDS = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
AHEADS = (1, 2, 3, 4, 6, 8, 12, 16)


@dataclass(frozen=True)
class LmsSettings:
    swapout_threshold: int
    swapin_ahead: int


class LmsOutOfMemory(OutOfRoom):
    """LMS found no room for a tensor: the configuration cannot run."""


@dataclass(frozen=True)
class SwapPoints:
    """Where an online swapping policy moves activations, per step of the schedule:
    ``out_after[a]``: written back (if the host copy is stale) and freed after step a;
    ``in_before[b]``: swapped in before step b, once step b - 1 has finished (the control edge
    TFLMS gives a swap-in: it does not start earlier even with room);
    ``copy_after[a]``: host copy made after step a while the tensor stays (TFLMS's swap-out runs
    as soon as its tensor is produced; the memory is freed only at ``out_after``)."""
    out_after: list[list[int]]
    in_before: list[list[int]]
    copy_after: list[list[int]] | None = None

    @classmethod
    def none(cls, steps: int) -> "SwapPoints":
        """No swap at any of ``steps`` steps, host copies included (TFLMS's points are added to it)."""
        return cls([[] for _ in range(steps)], [[] for _ in range(steps)], [[] for _ in range(steps)])

    def add_tflms_swaps(self, t: int, uses, swapped_at, start_of) -> None:
        """TFLMS's rewriting for tensor ``t`` (both versions): its host copy made after its first
        use (``uses``, the steps using it); for each swapped reader at step b (in ``swapped_at``)
        after a use at step a, a swap-out after a and a swap-in before ``start_of(a, b)`` (the
        step after its control operator's), where that lies after a; the tensor stays otherwise."""
        self.copy_after[uses[0]].append(t)
        for a, b in zip(uses, uses[1:]):
            if b in swapped_at:
                start = start_of(a, b)
                if start > a:
                    self.out_after[a].append(t)
                    self.in_before[start].append(t)


def swap_gaps(g, steps: StepFacts, settings: LmsSettings) -> SwapPoints:
    """Per step, the activations swapped out after it and those swapped in before it."""
    n = len(steps.schedule)
    out_after: list[list[int]] = [[] for _ in range(n)]
    in_before: list[list[int]] = [[] for _ in range(n)]
    for t, uses in enumerate(steps.uses):
        if g.tensors[t].kind != Kind.ACTIVATION or g.producer[t] < 0:
            continue
        for a, b in zip(uses, uses[1:]):
            if b - a >= settings.swapout_threshold:
                out_after[a].append(t)
                in_before[max(a + 1, b - settings.swapin_ahead)].append(t)
    return SwapPoints(out_after, in_before)


def _one_pass(request: PlanRequest, order, steps: StepFacts, points: SwapPoints, resident, policy: str,
              label: str):
    g, budget = request.graph, request.budget
    try:
        out = OnlineProgram(g, online_allocator(request), budget.scratch_bytes, order, policy, resident)
    except PlanError as e:
        raise LmsOutOfMemory(f"{policy} is out of memory before the first operator: {e}") from None
    obj_of = out.obj_of
    copy_after = points.copy_after or [()] * len(order)

    def place(t: int, pos: int) -> int:
        o = out.place(t)
        if o is None:
            node = g.nodes[order[pos]]
            raise LmsOutOfMemory(
                f"{label} is out of memory at '{node.name}' ({node.op}): no room for '{g.tensors[t].name}' "
                f"({format_bytes(out.nbytes[t])}) in a pool of {format_bytes(budget.pool_bytes)} with allocator "
                f"'{out.alloc.name}'")
        return o

    trigger = -1                            # the last compute: TFLMS's control edge to a swap-in
    for pos, nid in enumerate(order):
        for t in points.in_before[pos]:
            if obj_of[t] < 0:
                out.swap_in(t, place(t, pos), after=trigger)
        for t in steps.inputs[pos]:
            if obj_of[t] < 0:               # first use of a leaf on the host
                out.swap_in(t, place(t, pos))
        out_objs = [obj_of[src] if src >= 0 else place(t, pos)
                    for t, src in zip(steps.outputs[pos], steps.in_place[pos])]
        out.compute(pos, nid, out_objs)
        trigger = len(out.instrs) - 1
        for t in copy_after[pos]:
            if obj_of[t] >= 0:
                out.write_back(t)
        for t in (*steps.inputs[pos], *steps.outputs[pos]):
            if obj_of[t] >= 0 and steps.dies_at(t, pos):
                out.drop(t)
        for t in points.out_after[pos]:
            if obj_of[t] >= 0:
                out.write_back(t)
                out.drop(t)
    return out


def plan_swap_points(request: PlanRequest, order, steps: StepFacts, points: SwapPoints, policy: str,
                     label: str):
    """The Program of an online swapping policy that moves activations at ``points`` and keeps
    everything else on the device (persistent state resident, settled by the double pass);
    LmsOutOfMemory, one line starting with ``label``, where it does not fit."""
    def one_pass(resident):
        out = _one_pass(request, order, steps, points, resident, policy, label)
        return out, out.leave_state()
    return settle(one_pass, persistent_state(request.graph), policy)


def plan_lms(request: PlanRequest, settings: LmsSettings, steps: StepFacts | None = None):
    """The LMS Program for one setting; LmsOutOfMemory (one line) where it does not fit.
    ``steps``: the request's StepFacts, when the caller plans several settings."""
    g = request.graph
    order = list(request.schedule if request.schedule is not None else request.facts.order)
    steps = steps if steps is not None else StepFacts(g, order)
    label = (f"lms (swapout_threshold={settings.swapout_threshold}, swapin_ahead={settings.swapin_ahead})")
    return plan_swap_points(request, order, steps, swap_gaps(g, steps, settings), POLICY.name, label)


def tune(request: PlanRequest, thresholds=THRESHOLDS, aheads=AHEADS):
    """TFLMS's autotune on the simulator: the fastest (Program, seconds, settings) over the grid;
    LmsOutOfMemory (the most frugal setting's line) if none fits."""
    grid = [LmsSettings(threshold, ahead) for threshold in thresholds for ahead in aheads if ahead < threshold]
    steps = StepFacts(request.graph, request.schedule if request.schedule is not None else request.facts.order)
    best, refused = fastest(request, grid, lambda settings: (plan_lms(request, settings, steps), settings),
                            LmsOutOfMemory)
    if best is None:
        raise refused[0]
    return best


def settings_of(request: PlanRequest) -> LmsSettings | None:
    """Both thresholds from ``policy_options``, or None: tuned (or TFLMS-like defaults without a profile)."""
    opts = dict(request.policy_options or {})
    if "swapout_threshold" in opts or "swapin_ahead" in opts:
        return LmsSettings(int(opts.get("swapout_threshold", 8)), int(opts.get("swapin_ahead", 4)))
    return None if request.profile is not None else LmsSettings(8, 4)


def make(request: PlanRequest):
    settings = settings_of(request)
    if settings is None:
        return tune(request)[0]
    return plan_lms(request, settings)


POLICY = register(Policy("lms", "TFLMS baseline: activations swapped by operator distance (thresholds tuned "
                         "on the simulator), online allocator", make, kinds=(ONLINE,)))
