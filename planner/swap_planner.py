"""The swap planner (SwapAdvisor Section 4.2): schedule + allocation -> Program.

The planner walks the schedule keeping track of which tensor sits in which object
of a size-class layout (``allocator.SizeClassLayout``). When an operator needs a tensor that
is not resident, it takes the free object of the tensor's class that became free earliest (a
copy into it can start soonest); for an output, the one a compute freed last (the output waits
for nothing, and objects freed long ago stay free for swap-ins); if none is free it evicts a resident
tensor of that class: the one used furthest in the future (Belady), among those last used at
least a threshold ago (so there is time to swap it out before its object is needed). Leaves
whose host copy is current (parameters, inputs) stay resident after their last read until
evicted, which copies nothing (the paper's semantics). A swap-out copies to the host only
when the host copy is stale; a parameter nothing updates (a forward-only graph's weights) is
its own next value in ``Graph.state_pairs``, so it is state that may stay resident across
iterations and whose host copy never goes stale. With ``headroom``, after each operator the
planner also evicts ahead of need, keeping that fraction of each touched class free, so that the copy into an
evicted object starts right after the victim's last use instead of at the step that needs it.

Every instruction carries the edges that make it safe; a swap-in depends only on its object
being released and its host copy being written, so it runs as early as that allows
(prefetch), not when the compute stream reaches it. The planner keeps every edge until the
streams' order is final: with ``order_copies`` (and a profile) the copy streams are
reordered by urgency (``planner.stream_order``), so a swap-in waiting for its object no
longer holds those queued behind it; then edges within a stream are dropped as implied.

Double pass: the first pass starts with no state on the device; the state whose
next values end resident become the initial residents of the next pass, in the
objects where they ended. A resident whose next value does not end in its home
object is dropped from the set and the pass repeated, until a fixed point: the
Program then leaves the device as it found it and can run every iteration.

Ties are broken deterministically: inputs that die at a step are freed in reverse input
order, evicting ahead visits the touched classes in ascending order, a victim's ties go to
the lowest tensor id. The pass itself is compiled (``planner.swap_scan``); this module
prepares its arrays, runs the passes and turns the result into a Program (``plan``) or
hands the arrays to the search (``final_arrays``).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from allocator import PlacedLayout, SizeClassLayout
from engine.graph_io import fingerprint
from engine.inplace import InPlace
from engine.ir import Graph, Kind, PERSISTENT_KINDS
from engine.liveness import kept_mask
from engine.recompute import recomputable_mask
from engine.profile import Profile
from engine.program import Arena, Program

from . import swap_scan
from .first_compile import announced
from .errors import PlanError
from .program_arrays import ProgramArrays
from .stream_order import order_arrays, renumber_arrays


@dataclass(frozen=True)
class PlanOptions:
    victim: str = "belady"            # "belady" (SwapAdvisor) or "lru" (on-demand swapping)
    threshold_s: float | None = None  # recency threshold; None: the incoming tensor's transfer time
    max_passes: int = 16
    # Evict ahead of need: after each operator, keep this fraction of each size class's
    # objects free by evicting (Belady) tensors whose next use is far enough away that the
    # swap-out and the swap-in back both fit before it (``ahead_gap`` transfer times).
    headroom: float = 0.0
    ahead_gap: float = 2.0
    # Evicting ahead may also take tensors kept to the end (a state's next value, the loss),
    # whose copy out then starts right away instead of when their object is needed: with
    # updates among the backward pass, the next values otherwise hold their objects until a
    # swap-in waits on their copy out (WResNet-152-10, updates when ready: 38.1 -> 32.9 s).
    kept_ahead: bool = False
    # Reorder the copy streams by urgency after planning (planner.stream_order); needs op
    # times and a link.
    order_copies: bool = False
    # A compute's output takes the free object a compute freed last, a swap-in the one freed
    # earliest (False: both the earliest). Analytic V100, 16 GiB, default order: the five
    # Table 1 models 114.2 -> 112.6 s on the allocation of the time (commit b1e912a).
    newest_for_outputs: bool = True
    # Recomputation: an evicted tensor whose host copy is stale is dropped and recomputed at its
    # next read (from its producer, or a chain of up to ``max_chain`` producers) instead of
    # copied out and back, when that costs less than ``recompute`` times the copies (0: swap
    # only). ``recompute_only``: no stale tensor is copied out; only tensors that can be
    # recomputed, or whose host copy is current, leave (checkpointing).
    recompute: float = 0.0
    recompute_only: bool = False
    max_chain: int = 8
    keep: tuple = ()            # tensors never dropped for recomputation (a policy's checkpoints)
    # Count the chains of dropped tensors a chain reads in the check that it fits (safer: the pass
    # then never runs out of objects recreating it, but drops less). ``plan_arrays`` tries
    # without, then with it, then swap only.
    through_dropped: bool = False
    # Recompute nodes of several outputs too (a split, a layer norm with its statistics): the
    # recomputation writes each output (``swap_scan._recompute``).
    several_outputs: bool = False


class GraphArrays:
    """Per-graph arrays the compiled pass reads (node inputs and outputs in CSR form, tensor
    sizes and roles: ``pass_graph``), and the graph's in-place declarations; made once per
    graph (``of``)."""

    _cache: "weakref.WeakKeyDictionary[Graph, GraphArrays]" = weakref.WeakKeyDictionary()

    def __init__(self, g: Graph):
        self.shape = (len(g.nodes), len(g.tensors))
        nodes = g.nodes
        self.in_ptr = _ptr([len(n.inputs) for n in nodes])
        self.ins = _flat([n.inputs for n in nodes])
        uniq = [list(dict.fromkeys(n.inputs)) for n in nodes]
        self.uniq_ptr = _ptr([len(u) for u in uniq])
        self.uniq_in = _flat(uniq)
        self.out_ptr = _ptr([len(n.outputs) for n in nodes])
        self.outs = _flat([n.outputs for n in nodes])
        n_t = len(g.tensors)
        self.nbytes = np.array([t.nbytes for t in g.tensors], dtype=np.int64)
        self.tensor_bytes = self.nbytes.astype(np.float64)     # what the dispatch loop reads
        self.kept = kept_mask(g)                          # must survive the iteration
        self.host_at_start = np.zeros(n_t, dtype=np.bool_)
        self.host_at_start[g.leaves(Kind.INPUT, Kind.LABEL, *PERSISTENT_KINDS)] = True
        # Leaves whose host copy is current stay resident after their last read until evicted
        # (the paper's semantics; evicting them copies nothing).
        self.stays = self.host_at_start & ~self.kept
        self.producer = np.asarray(g.producer, dtype=np.int64)
        # Nodes a plan may run again (``engine.recompute``); most plans only those of one output,
        # whose recomputation writes only the tensor it recreates (``PlanOptions.several_outputs``).
        self.recomputable_any = recomputable_mask(g)
        self.recomputable = self.recomputable_any & (np.diff(self.out_ptr) == 1)
        self.state_cur = np.array([c for c, _ in g.state_pairs], dtype=np.int64)
        self.state_nxt = np.array([x for _, x in g.state_pairs], dtype=np.int64)
        self.in_place = InPlace.of(g)
        self.pass_graph = swap_scan.PassGraph(**{name: getattr(self, name) for name in swap_scan.PassGraph._fields})

    @classmethod
    def of(cls, g: Graph) -> "GraphArrays":
        arrays = cls._cache.get(g)
        if arrays is None or arrays.shape != (len(g.nodes), len(g.tensors)):
            arrays = cls._cache[g] = cls(g)
        return arrays


def _ptr(lengths) -> np.ndarray:
    ptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(lengths)
    return ptr


def _flat(lists) -> np.ndarray:
    return np.fromiter((x for xs in lists for x in xs), dtype=np.int64)


class _Schedule:
    """Per-schedule and per-allocation inputs of a pass."""

    def __init__(self, g: Graph, ga: GraphArrays, schedule: Sequence[int], layout: SizeClassLayout,
                 op_seconds: np.ndarray | None, link_bytes_per_s: float | None, opts: PlanOptions):
        self.schedule = np.asarray(schedule, dtype=np.int64)
        try:
            self.klass = layout.class_of_sizes(ga.nbytes).astype(np.int64)
        except ValueError as e:
            raise PlanError(str(e)) from None
        end = len(self.schedule)
        self.read_ptr, self.reads = swap_scan.reads_of(self.schedule, ga.uniq_ptr, ga.uniq_in, len(ga.nbytes))
        self.in_place = self._in_place(ga)
        # "Next use" once a tensor's reads are done: the end for kept tensors, else never.
        self.after_reads = np.where(ga.kept, end, end + 1).astype(np.int64)
        secs = np.ones(len(g.nodes)) if op_seconds is None else np.asarray(op_seconds, dtype=np.float64)
        self.step_end = np.cumsum(secs[self.schedule]) if end else np.zeros(0)  # compute-only finish times
        # By next-use step: when that step starts; at the end (kept tensors); never.
        self.use_time = np.concatenate(([0.0], self.step_end, [np.inf]))
        # State nothing updates (a forward-only graph's weights) is next read in the next
        # iteration, at its first read: one slot each past ``never``, at the end plus that
        # time, so Belady keeps resident the weights the next iteration needs first.
        same = ga.state_cur[ga.state_cur == ga.state_nxt]
        if len(same):
            has_read = self.read_ptr[same + 1] > self.read_ptr[same]
            first = np.where(has_read, self.reads[np.minimum(self.read_ptr[same], len(self.reads) - 1)], end)
            self.after_reads[same] = end + 2 + np.arange(len(same))
            self.use_time = np.concatenate((self.use_time, self.use_time[end] + self.use_time[first]))
        self.link = float(link_bytes_per_s or 0.0)
        self.class_first = np.asarray(layout.class_first_object, dtype=np.int64)
        self.object_class = np.asarray(layout.object_class, dtype=np.int64)
        counts = np.diff(self.class_first)
        self.headroom = np.ceil(opts.headroom * counts).astype(np.int64)
        # The chunk class (allocations with chunk_bytes): a tensor of it takes width chunks.
        chunk = layout.allocation.chunk_bytes
        self.chunk_class = layout.allocation.num_classes - 1 if chunk else -1
        self.width = np.ones(len(ga.nbytes), dtype=np.int64)
        if chunk:
            chunked = self.klass == self.chunk_class
            self.width[chunked] = -(-ga.nbytes[chunked] // chunk)
        self.slot_ptr = _ptr(self.width)
        # Bounds on what a pass emits: every swap-out evicts a tensor a compute or swap-in placed.
        def total(ptr, flat=None):
            if flat is None:
                return int((ptr[self.schedule + 1] - ptr[self.schedule]).sum())
            per_node = np.add.reduceat(np.append(flat, 0), ptr[:-1])[:len(ptr) - 1] * (np.diff(ptr) > 0)
            return int(per_node[self.schedule].sum())
        n_in, n_uniq, n_out = total(ga.in_ptr), total(ga.uniq_ptr), total(ga.out_ptr)
        copies_out = n_out + n_uniq + 2 * len(ga.state_cur)     # evictions, then state written back
        self.n_instr_max = end + n_uniq + copies_out + 1
        self.n_objs_max = n_in + n_out + 1
        if chunk:   # a chunked tensor's copies and computes wait on each of its chunks
            w_uniq, w_out = total(ga.uniq_ptr, self.width[ga.uniq_in]), total(ga.out_ptr, self.width[ga.outs])
            self.n_deps_max = n_in + 3 * w_out + 4 * w_uniq + copies_out + 1
            # Placements: one per swap-in, output and resident state; chunks: their widths.
            self.n_pl_max = n_uniq + n_out + len(ga.state_cur) + 1
            self.n_pl_chunks_max = w_uniq + w_out + int(self.width[ga.state_cur].sum()) + 1
        else:
            self.n_deps_max = n_in + 3 * n_out + 4 * n_uniq + copies_out + 1
            self.n_pl_max = self.n_pl_chunks_max = 0
        self.order = swap_scan.PassOrder(schedule=self.schedule, in_place=self.in_place, read_ptr=self.read_ptr,
                                         reads=self.reads, after_reads=self.after_reads, step_end=self.step_end,
                                         use_time=self.use_time, node_s=secs, may_drop=self._may_drop(ga, opts),
                                         recomputable=ga.recomputable_any if opts.several_outputs else ga.recomputable)
        self.layout = swap_scan.PassLayout(klass=self.klass, class_first=self.class_first,
                                           object_class=self.object_class, headroom=self.headroom,
                                           chunk_class=int(self.chunk_class), width=self.width, slot_ptr=self.slot_ptr)
        # The bounds count each operator once. Recomputations add computes no bound counts up front,
        # so a pass that may recompute starts with twice the room: a full buffer costs a whole pass
        # again (BRNN-4-8K, default order: every pass overran its objects by about 10%, doubling the
        # search's per-candidate time), and a buffer a pass grew stays grown for the next (``_scan``).
        room = 2 if opts.recompute > 0 or opts.recompute_only else 1
        self.bound_capacity = swap_scan.Capacity(instrs=int(self.n_instr_max), deps=int(self.n_deps_max),
                                                 objects=int(self.n_objs_max), placements=int(self.n_pl_max),
                                                 placement_chunks=int(self.n_pl_chunks_max))
        self.capacity = swap_scan.Capacity(*(room * c for c in self.bound_capacity))
        self.rules = swap_scan.PassRules(victim=swap_scan.LRU if opts.victim == "lru" else swap_scan.BELADY,
                                         threshold_s=-1.0 if opts.threshold_s is None else float(opts.threshold_s),
                                         link=self.link, evict_ahead=opts.headroom > 0 and not opts.recompute_only,
                                         ahead_gap=float(opts.ahead_gap), kept_ahead=bool(opts.kept_ahead),
                                         newest_for_outputs=bool(opts.newest_for_outputs),
                                         recompute=float(opts.recompute), recompute_only=bool(opts.recompute_only),
                                         max_chain=int(opts.max_chain),
                                         through_dropped=bool(opts.through_dropped))

    @staticmethod
    def _may_drop(ga: GraphArrays, opts: PlanOptions) -> np.ndarray:
        may_drop = np.ones(len(ga.nbytes), dtype=np.bool_)
        may_drop[np.asarray(opts.keep, dtype=np.int64)] = False
        return may_drop

    def _in_place(self, ga: GraphArrays) -> np.ndarray:
        """Per output entry (as ``ga.outs``): the index among its node's inputs of the input the
        in-place rule (``engine.inplace``) writes it over in this order, or -1."""
        decl = ga.in_place
        in_place = np.full(len(ga.outs), -1, dtype=np.int64)
        if not len(decl.node):
            return in_place
        position = np.full(ga.shape[0], -2, dtype=np.int64)      # -2: a node not in the schedule
        position[self.schedule] = np.arange(len(self.schedule))
        read_ptr, reads = self.read_ptr, self.reads
        has_read = read_ptr[1:] > read_ptr[:-1]
        last_read = np.where(has_read, reads[np.maximum(read_ptr[1:] - 1, 0)] if len(reads) else -1, -1)
        taken = decl.taken(position, last_read, ga.kept)
        in_place[ga.out_ptr[decl.node[taken]] + decl.out_index[taken]] = decl.src_index[taken]
        return in_place


def _scan(g: Graph, ga: GraphArrays, sc: _Schedule, layout: SizeClassLayout, resident: dict[int, int | tuple]):
    """One pass (``planner.swap_scan.scan``); its ProgramArrays, where tensors ended (the
    object, or for the chunk class the placement, and the chunks it holds), and which resident
    state strayed. ``resident``: state on the device at the start, by tensor: its object, or
    for the chunk class its chunks (a tuple). PlanError where an operator cannot run."""
    residents = swap_scan.Residents(
        tensor=np.fromiter(resident.keys(), dtype=np.int64, count=len(resident)),
        obj=np.array([-1 if isinstance(o, tuple) else o for o in resident.values()], dtype=np.int64),
        chunk_ptr=_ptr([len(o) if isinstance(o, tuple) else 0 for o in resident.values()]),
        chunks=np.array([c for o in resident.values() if isinstance(o, tuple) for c in o], dtype=np.int64))
    capacity = sc.capacity
    while True:
        st = swap_scan.new_state(ga.pass_graph, sc.order, sc.layout, sc.rules, capacity)
        with announced(swap_scan.scan, "the planner's swap pass"):
            swap_scan.scan(st, residents)
        out = st.out
        code, step, subject = (int(x) for x in out.fault)
        # Recomputations have no bound a pass can count up front (a tensor may be dropped and
        # recreated at each of its reads): their buffers grow instead. Without them a full
        # buffer means the bound is wrong.
        if code != swap_scan.BUFFER_FULL or not (sc.rules.recompute > 0 or sc.rules.recompute_only) \
                or capacity.instrs > 64 * sc.bound_capacity.instrs:
            break
        capacity = swap_scan.Capacity(*(2 * c for c in capacity))
        sc.capacity = capacity
    if code == swap_scan.BUFFER_FULL:
        name = swap_scan.CAPACITY_NAMES[subject]
        raise RuntimeError(f"planner bug: the swap pass's {name} buffer (capacity {getattr(capacity, name)}) is full")
    if code != swap_scan.OK:
        node = g.nodes[int(sc.schedule[step])]
        if code == swap_scan.NEEDS_MORE_OBJECTS:
            need = sum(int(sc.width[x]) for x in set(node.inputs) | set(node.outputs) if sc.klass[x] == subject)
            what = "chunks (the chunk class)" if subject == sc.chunk_class else f"objects of size class {subject}"
            have = len(layout.objects_of_class(subject))
            if need <= have:        # the objects went to recomputing a dropped input and what stays resident
                raise PlanError(f"recomputing a dropped input of operator '{node.name}' ({node.op}) needs more "
                                f"{what} than the allocation's {have} beside what must stay resident")
            raise PlanError(f"operator '{node.name}' ({node.op}) needs {need} {what} at once; the allocation has {have}")
        if code == swap_scan.IN_PLACE_NOT_DYING:
            raise RuntimeError(f"planner bug: operator '{node.name}' writes over '{g.tensors[subject].name}' in "
                               "place, but the swap pass finds it still needed")
        raise PlanError(f"operator '{node.name}' reads '{g.tensors[subject].name}', which is "
                        "neither resident nor on the host (planner bug)")
    n, held, obj_of = int(out.count[0]), st.chunks.held, st.res.obj_of
    obj_ptr = _ptr(out.obj_count[:n])
    arrays = ProgramArrays(out.kind[:n], out.target[:n], out.obj[:n], out.copy[:n], out.dep_ptr[:n + 1],
                           out.deps[:out.dep_ptr[n]], obj_ptr, out.objects[:obj_ptr[n]], out.recompute[:n])

    def where(t: int):
        if obj_of[t] < 0:
            return None
        if sc.klass[t] == sc.chunk_class:
            return tuple(held[sc.slot_ptr[t]:sc.slot_ptr[t + 1]].tolist())
        return int(obj_of[t])

    pl_ptr, n_pl = st.chunks.placement_ptr, int(st.chunks.n_placements[0])
    return arrays, where, st.res.strayed, (pl_ptr[:n_pl + 1], st.chunks.placement_chunks[:pl_ptr[n_pl]])


def plan_arrays(g: Graph, schedule: Sequence[int], allocation, profile: Profile | None = None,
                node_seconds: np.ndarray | None = None, options: PlanOptions = PlanOptions()):
    """The planned instructions as ProgramArrays, in the order the planner emits them (every
    edge kept), with the layout, the initially resident state (tensor -> object) and the
    placements of the chunk class (``allocator.PlacedLayout``, None without one): (arrays, layout,
    resident, placements). ``plan`` turns them into a Program; the search times them without
    making one. A pass that recomputes and cannot plan (the objects ran out recreating a chain) is
    tried again counting the chains of the dropped tensors a chain reads (``through_dropped``),
    then gives way to the swap-only pass: recomputing never loses a plan swapping has."""
    if options.recompute > 0 and not options.recompute_only:
        for attempt in dict.fromkeys((options, replace(options, through_dropped=True))):
            try:
                return _plan_arrays(g, schedule, allocation, profile, node_seconds, attempt)
            except PlanError:
                pass
        options = replace(options, recompute=0.0)
    return _plan_arrays(g, schedule, allocation, profile, node_seconds, options)


def _plan_arrays(g: Graph, schedule: Sequence[int], allocation, profile: Profile | None,
                 node_seconds: np.ndarray | None, options: PlanOptions):
    layout = SizeClassLayout.from_allocation(allocation)
    if profile is not None and node_seconds is None:
        node_seconds = profile.node_seconds(g)
    link = profile.link.h2d_bytes_per_s if profile is not None else None
    ga = GraphArrays.of(g)
    sc = _Schedule(g, ga, schedule, layout, node_seconds, link, options)
    resident: dict[int, int | tuple] = {}
    first = True
    for _ in range(options.max_passes):
        arrays, where, strayed, placed = _scan(g, ga, sc, layout, resident)
        if first:
            # State whose next value ended on the device becomes resident, where it ended.
            first = False
            ended = ((cur, where(nxt)) for cur, nxt in zip(ga.state_cur.tolist(), ga.state_nxt.tolist()))
            resident = {cur: at for cur, at in ended if at is not None}
            if not resident:
                break
        elif strayed.any():
            for cur in ga.state_cur[strayed].tolist():
                del resident[cur]
        else:
            break
    else:
        raise PlanError(f"the double pass did not settle in {options.max_passes} passes")
    if sc.chunk_class < 0:
        return arrays, layout, resident, None
    # The pass placed chunked residents first, in this order: placements 0, 1, ...
    first_placement = iter(range(layout.num_objects, layout.num_objects + len(resident)))
    resident = {t: next(first_placement) if isinstance(at, tuple) else at for t, at in resident.items()}
    return arrays, layout, resident, PlacedLayout(layout, *placed)


def final_arrays(g: Graph, schedule: Sequence[int], allocation, profile: Profile | None = None,
                 node_seconds: np.ndarray | None = None, options: PlanOptions = PlanOptions()):
    """``plan_arrays`` with the streams' order made final (copies ordered by urgency with
    ``options.order_copies`` and a profile), same-stream edges dropped: what ``plan`` makes a
    Program of, and what the search simulates directly."""
    if profile is not None and node_seconds is None:
        node_seconds = profile.node_seconds(g)
    arrays, layout, resident, placements = plan_arrays(g, schedule, allocation, profile, node_seconds, options)
    if options.order_copies and profile is not None:
        arrays = order_arrays(arrays, GraphArrays.of(g).tensor_bytes, node_seconds, profile)
    else:
        arrays = renumber_arrays(arrays, np.arange(len(arrays), dtype=np.int64))
    return arrays, layout, resident, placements


def program_of(g: Graph, schedule: Sequence[int], final, scratch_bytes: int, policy: str = "swapadvisor") -> Program:
    """The Program of ``final_arrays``' result for ``schedule``, with ``scratch_bytes`` of
    operator scratch at the arena's end."""
    arrays, layout, resident, placements = final
    arena = Arena.of(layout if placements is None else placements, scratch_bytes)
    return Program(g.name, list(schedule), arena, arrays.to_instrs(), dict(resident), policy, fingerprint(g))


def plan(g: Graph, schedule: Sequence[int], allocation, scratch_bytes: int, profile: Profile | None = None,
         node_seconds: np.ndarray | None = None, options: PlanOptions = PlanOptions(),
         policy: str = "swapadvisor") -> Program:
    """Inputs: the training graph, a topological order of its nodes, an allocation
    (sizes, cls, cnt: allocator.Allocation), the operator scratch to reserve at the arena's
    end (``GraphFacts.scratch`` or ``Budget.scratch_bytes``), the profile (optional; its op
    times, ``node_seconds`` if precomputed, and link set the recency threshold and how far
    ahead to evict, and order the copy streams).
    Output: a Program that runs one iteration within the allocation's objects plus scratch
    (for a chunked allocation, a virtual-addressing arena: ``allocator.PlacedLayout``).
    Raises PlanError when the allocation cannot hold some operator's tensors."""
    final = final_arrays(g, schedule, allocation, profile, node_seconds, options)
    return program_of(g, schedule, final, scratch_bytes, policy)
