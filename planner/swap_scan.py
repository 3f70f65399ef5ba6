"""One pass of the swap planner over the schedule, compiled (numba) over flat arrays.

``planner.swap_planner`` holds the rules in prose, prepares this pass's inputs and drives the
passes; this module is the loop itself. It walks the schedule keeping which tensor sits in
which object, and emits instructions into buffers whose capacities the driver computes (every
swap-out evicts a tensor a compute or swap-in placed); a write past one is refused as a
BUFFER_FULL fault naming the buffer, never made.

Everything travels in named records (namedtuples, which numba compiles as tuples): the inputs
``PassGraph``, ``PassOrder``, ``PassLayout``, ``PassRules``, ``Residents`` and ``Capacity``; the
pass's state ``State`` (``new_state``), made of ``Residency`` (who sits in which object),
``TensorState``, ``FreeRings``, ``MaxTree``, ``Chunks``, ``Instrs`` (the output) and
``StepScratch``. Counters that helpers advance are one-element arrays (``Instrs.count``).
Names follow the planner's vocabulary: tenant (the tensor in an object), release (per object
and stream, the instruction after which the object may be written), writer (the instruction
that made a tensor resident), host writer (the swap-out that wrote its host copy; -1 for a host
copy given at the start, NOT_HOST when the host copy is stale).

The pass decides nothing the rest of the planner also decides: which output is written over
which input comes in as data (``PassOrder.in_place``, from ``engine.inplace.InPlace``), and
which resident tensor leaves first is ``evicts_first``, which the window policy shares.

Speed (the search runs this for every candidate): the pass allocates nothing (``new_state``
allocates every buffer in Python) and is compiled without numba's reference counting, so
records pass between its inlined helpers for free (with counting, each helper call counted
every array of the records it was given); evicting ahead asks a per-class max-tree for the
furthest tenant instead of scanning the class after every operator. The chunk class has
thousands of objects and tensors that take hundreds of them, so work per chunk is kept to plain
array writes: a chunked tensor's key sits in the max-tree at its lowest chunk only, an
instruction's candidate dependencies skip those it has already (a tensor's chunks were released
by a few instructions), and the free rings take and give a tensor's chunks in one call.

Compile time: helpers are inlined into ``scan`` where they run at every step; the rarer ones
that call many others (pricing and recreating a recompute chain) are called instead, compiled
once each, without reference counting too: inlining them at each call site multiplied the
code LLVM compiles (over 15 minutes and 17 GB before this). So are the helpers with several call
sites whose bodies hold other inlined helpers (a swap-in, a compute's emission, a placement and
the free rings' pushes and pops): a cold first plan then compiled in 141 CPU-s and 1.4 GB instead
of 309 and 5.1 GB, for 2-7% more time per pass (NasNet-25, RNN-8-8K, WResNet-152-10). Calling
the eviction helpers too (``_acquire``, ``_evict``, ``_victim``) would halve the compile again but
cost 15-20% per pass: each call copies the whole ``State`` record.

The helpers stay in this file although it is long: numba's cache (cache=True) is invalidated by
a change to the caching function's own file only, so a helper inlined from another module could
leave a stale compiled scan behind after an edit.
"""
from __future__ import annotations

from collections import namedtuple

import numba
import numpy as np

COMPUTE, SWAP_IN, SWAP_OUT = 0, 1, 2
NOT_HOST = -2
# Which resident tensor leaves first (``PassRules.victim``).
BELADY, LRU = 0, 1
# A pass's fault (``Instrs.fault``): its code at FAULT_CODE, the step at FAULT_STEP, and at
# FAULT_SUBJECT the size class (NEEDS_MORE_OBJECTS), the tensor (NOT_ON_HOST, IN_PLACE_NOT_DYING)
# or the buffer (BUFFER_FULL).
OK, NEEDS_MORE_OBJECTS, NOT_ON_HOST, BUFFER_FULL, IN_PLACE_NOT_DYING = 0, 1, 2, 3, 4
# Recomputations one recovery may make, in chains of max_chain nodes (``_recover``): tiny RNN,
# recomputing only at 0.85 of its unlimited allocation, made 23,442 in one step, 44x ideal.
RECOVERY_LIMIT = 16
FAULT_CODE, FAULT_STEP, FAULT_SUBJECT = 0, 1, 2
# The output buffers, by Capacity's field order (BUFFER_FULL's subject).
INSTRS_BUFFER, DEPS_BUFFER, OBJECTS_BUFFER, PLACEMENTS_BUFFER, PLACEMENT_CHUNKS_BUFFER = 0, 1, 2, 3, 4

# ---- inputs (made by planner.swap_planner)
# The graph: node inputs (with repeats, and distinct) and outputs in CSR form by node id;
# per tensor its bytes, whether it must survive the iteration (kept), whether it stays resident
# after its last read (stays: its host copy is current), whether its host copy is given at
# the start, the node that produces it (-1 for a leaf); the state pairs (current, next value).
PassGraph = namedtuple("PassGraph", ["in_ptr", "ins", "uniq_ptr", "uniq_in", "out_ptr", "outs", "nbytes", "kept",
                                     "stays", "host_at_start", "producer", "state_cur", "state_nxt"])
# The order: node ids by step; per output entry (as PassGraph.outs) the index among its node's
# inputs of the input it is written over, -1 for none; each tensor's reading steps in CSR form
# (read_ptr, reads); its next-use slot once its reads are done (after_reads); each step's
# compute-only finish time (step_end); the start time of each next-use slot (use_time); each
# node's seconds (node_s: what recomputing it costs); per tensor whether it may be dropped for
# recomputation (may_drop: a policy's checkpoints may not); per node whether the pass may run
# it again to recreate an output (recomputable: ``engine.recompute``, and for most plans one
# output; a recomputation of several writes each, ``_recompute``).
PassOrder = namedtuple("PassOrder", ["schedule", "in_place", "read_ptr", "reads", "after_reads", "step_end",
                                     "use_time", "node_s", "may_drop", "recomputable"])
# The size-class layout: each tensor's class; each class's first object (CSR), each object's
# class; the objects to keep free per class when evicting ahead (headroom); the chunk class
# (-1 for none), and per tensor how many of its objects it takes (width) and where its chunks
# are kept (slot_ptr, CSR over width).
PassLayout = namedtuple("PassLayout", ["klass", "class_first", "object_class", "headroom", "chunk_class", "width",
                                       "slot_ptr"])
# The rules: BELADY or LRU; the recency threshold in seconds (negative: the incoming tensor's
# transfer time); the link's bytes per second (0: none); whether to evict ahead of need and
# how many transfer times ahead; whether tensors kept to the end may leave ahead; whether a
# compute's output takes the object a compute freed last. Recomputation: an evicted tensor whose
# host copy is stale is dropped instead of copied out when recomputing it (its chain) costs less
# than ``recompute`` times copying it out and back (0: never; swap only); with ``recompute_only``
# only such tensors leave, beside those whose host copy is current (nothing is copied out:
# checkpointing; a parameter may be read from the host again); a chain recomputes at most
# ``max_chain`` nodes.
# A dropped tensor that a chain reads and that is read again later is a base of the chain
# (recreated by its own chain, whose tensors the check that the chain fits its classes does not
# count) unless ``through_dropped``: then it is a member, counted, its chain walked.
PassRules = namedtuple("PassRules", ["victim", "threshold_s", "link", "evict_ahead", "ahead_gap", "kept_ahead",
                                     "newest_for_outputs", "recompute", "recompute_only", "max_chain",
                                     "through_dropped"])
# State resident at the start: tensor and object, or for the chunk class its chunks (CSR).
Residents = namedtuple("Residents", ["tensor", "obj", "chunk_ptr", "chunks"])
# The output buffers' sizes (their order is the *_BUFFER constants').
Capacity = namedtuple("Capacity", ["instrs", "deps", "objects", "placements", "placement_chunks"])
CAPACITY_NAMES = Capacity._fields

# ---- the pass's state
Residency = namedtuple("Residency", ["tenant", "obj_of", "next_use_at", "release", "home_of", "strayed"])
# anchor: the last step at which a dropped tensor's recomputation reads this one, which may not
# be dropped until then (so every chain planned stays recoverable, within its length).
TensorState = namedtuple("TensorState", ["busy", "last_touch", "read_no", "next_read", "writer", "host_writer",
                                         "pinned", "anchor"])
# Free objects of each class, FIFO rings (the earliest freed first): clean ones, and dirty ones
# (freed by an eviction whose copy out is still to finish).
FreeRings = namedtuple("FreeRings", ["clean", "clean_head", "clean_size", "dirty", "dirty_head", "dirty_size",
                                     "freed_at", "clock", "one"])
MaxTree = namedtuple("MaxTree", ["val", "obj", "base", "size"])
# A tensor of the chunk class sits in width[t] chunks, held in held[slot_ptr[t]:...]; the
# Program names it by a placement (object n_layout_objects + j, a virtual range over the chunks
# placement_chunks[placement_ptr[j]:placement_ptr[j + 1]]); its Belady key sits at key_chunk[t].
Chunks = namedtuple("Chunks", ["held", "key_chunk", "placement_ptr", "placement_chunks", "n_placements",
                               "n_layout_objects"])
Instrs = namedtuple("Instrs", ["count", "kind", "target", "obj", "copy", "dep_ptr", "deps", "obj_count", "recompute",
                               "objects", "n_objects", "seen", "fault"])
StepScratch = namedtuple("StepScratch", ["cand", "in_objs", "out_objs", "dying", "classes", "class_seen_at"])
# A recompute chain's work lists (one slot per tensor): the depth-first stack of the walk that
# prices a chain (``_chain_cost``) with a visit stamp per tensor (mark[t] == stamp[0]: seen in
# this walk) and the bases it finds (tensors it reads that stay available); the stack of the
# walk that recreates one (``_recover``, which may price others as it evicts) and the tensors it
# holds busy; the link's estimated backlog of copies out (when the d2h stream is next idle, in
# compute-only time); per size class, the objects a chain and its reader need at once (need:
# zero between walks).
Chain = namedtuple("Chain", ["stack", "mark", "stamp", "bases", "members", "need", "todo", "held", "out_free"])
# (held[t]: t is busy because a recomputation still to run reads it.)
State = namedtuple("State", ["graph", "order", "layout", "rules", "res", "tensors", "free", "tree", "chunks", "out",
                             "scratch", "chain", "key_end"])


@numba.njit(cache=True)
def reads_of(schedule, in_ptr, uniq_in, n_tensors):
    """Per tensor, the steps that read it (each node's distinct inputs), in CSR form."""
    count = np.zeros(n_tensors + 1, dtype=np.int64)
    for pos in range(schedule.shape[0]):
        nid = schedule[pos]
        for e in range(in_ptr[nid], in_ptr[nid + 1]):
            count[uniq_in[e] + 1] += 1
    ptr = np.cumsum(count)
    fill = ptr[:-1].copy()
    reads = np.empty(ptr[n_tensors], dtype=np.int64)
    for pos in range(schedule.shape[0]):
        nid = schedule[pos]
        for e in range(in_ptr[nid], in_ptr[nid + 1]):
            t = uniq_in[e]
            reads[fill[t]] = pos
            fill[t] += 1
    return ptr, reads


@numba.njit(cache=True, inline="always")
def evicts_first(key, t, best_key, best):
    """The eviction rule: whether tensor t, with ``key``, leaves before ``best`` (with
    ``best_key``; -1: none chosen yet). The larger key leaves first (Belady: the next use
    furthest away; LRU: the oldest last use, as its negation); ties go to the lowest tensor id."""
    return best < 0 or key > best_key or (key == best_key and t < best)


def new_state(graph, order, layout, rules, capacity):
    """The pass's state before step 0, every buffer allocated (the pass allocates nothing):
    nothing resident yet, every tensor's host copy stale. ``scan`` places the residents."""
    n_t = graph.nbytes.shape[0]
    n_obj = layout.object_class.shape[0]
    class_first = layout.class_first
    n_cls = class_first.shape[0] - 1
    # Tensors kept to the end (next values, the loss) have the end as next use. Belady's keys
    # treat that as "never leaves ahead" unless kept_ahead: then key_end lies past every
    # next-use slot (steps, the end, never, next iteration's first reads), nothing matches it,
    # and they leave ahead like any tensor used at the end's time.
    key_end = len(order.schedule) + (len(graph.state_cur) + 3 if rules.kept_ahead else 0)
    i64 = np.int64

    def filled(n, value, dtype=i64):
        return np.full(n, value, dtype=dtype)

    # next_use_at: when each object's tenant is next used (use_time of its next read), kept
    # current while the object is occupied (stale once vacated: readers check tenant first).
    res = Residency(tenant=filled(n_obj, -1), obj_of=filled(n_t, -1), next_use_at=np.zeros(n_obj),
                    release=filled((n_obj, 3), -1), home_of=filled(n_t, -1),
                    strayed=np.zeros(len(graph.state_cur), dtype=np.bool_))
    tensors = TensorState(busy=np.zeros(n_t, dtype=np.bool_), last_touch=filled(n_t, -1), read_no=filled(n_t, 0),
                          next_read=np.empty(n_t, dtype=i64), writer=filled(n_t, -1), host_writer=filled(n_t, NOT_HOST),
                          pinned=graph.kept & graph.host_at_start,     # state nothing updates: never evicted ahead
                          anchor=filled(n_t, -1))
    free = FreeRings(clean=np.empty(n_obj, dtype=i64), clean_head=filled(n_cls, 0), clean_size=filled(n_cls, 0),
                     dirty=np.empty(n_obj, dtype=i64), dirty_head=filled(n_cls, 0), dirty_size=filled(n_cls, 0),
                     freed_at=filled(n_obj, 0), clock=filled(1, 1), one=np.empty(1, dtype=i64))
    # Per class, a max-tree over its objects of next_use_at (-inf when empty or holding a tensor
    # kept to the end): the furthest tenant in O(1), which evicting ahead asks after every
    # operator. Built only when evicting ahead.
    counts = np.diff(class_first)
    tree_size = np.ones(n_cls, dtype=i64)
    big = counts > 1
    tree_size[big] = 1 << np.ceil(np.log2(counts[big])).astype(i64)
    tree_base = np.zeros(n_cls, dtype=i64)
    tree_base[1:] = np.cumsum(2 * tree_size)[:-1]
    n_tree = int(tree_base[-1] + 2 * tree_size[-1]) if n_cls > 0 and rules.evict_ahead else 0
    tree = MaxTree(val=filled(n_tree, -np.inf, np.float64), obj=filled(n_tree, -1), base=tree_base, size=tree_size)
    chunks = Chunks(held=filled(layout.slot_ptr[n_t], -1), key_chunk=filled(n_t, -1),
                    placement_ptr=filled(capacity.placements + 1, 0),
                    placement_chunks=np.empty(capacity.placement_chunks, dtype=i64), n_placements=filled(1, 0),
                    n_layout_objects=n_obj)
    out = Instrs(count=filled(1, 0), kind=np.empty(capacity.instrs, dtype=np.int8),
                 target=np.empty(capacity.instrs, dtype=i64), obj=np.empty(capacity.instrs, dtype=i64),
                 copy=np.empty(capacity.instrs, dtype=np.bool_), dep_ptr=filled(capacity.instrs + 1, 0),
                 deps=np.empty(capacity.deps, dtype=i64),
                 obj_count=filled(capacity.instrs, 0),          # a compute's objects; 0 for copies
                 recompute=np.zeros(capacity.instrs, dtype=np.bool_),
                 objects=np.empty(capacity.objects, dtype=i64), n_objects=filled(1, 0),
                 seen=filled(capacity.instrs, -1),              # seen[x] == n: x is already a candidate of n
                 fault=filled(3, 0))
    need, most_in, most_out = _step_needs(graph, order, layout)
    scratch = StepScratch(cand=np.empty(need, dtype=i64), in_objs=np.empty(most_in, dtype=i64),
                          out_objs=np.empty(most_out, dtype=i64), dying=np.empty(most_in, dtype=i64),
                          classes=np.empty(n_cls, dtype=i64), class_seen_at=filled(n_cls, -1))
    chain = Chain(stack=np.empty(n_t, dtype=i64), mark=filled(n_t, 0), stamp=filled(1, 0),
                  bases=np.empty(n_t, dtype=i64), members=np.empty(n_t, dtype=i64), need=filled(n_cls, 0),
                  todo=np.empty(n_t, dtype=i64), held=np.zeros(n_t, dtype=np.bool_),
                  out_free=np.zeros(1))
    return State(graph=graph, order=order, layout=layout, rules=rules, res=res, tensors=tensors, free=free,
                 tree=tree, chunks=chunks, out=out, scratch=scratch, chain=chain, key_end=key_end)


@numba.njit(cache=True)
def _step_needs(graph, order, layout):
    """The largest step's needs: candidate dependencies (a chunked tensor's copy or compute
    waits on each of its chunks), inputs, outputs."""
    need, most_in, most_out = 64, 64, 64
    for pos in range(order.schedule.shape[0]):
        nid = order.schedule[pos]
        n_in = graph.in_ptr[nid + 1] - graph.in_ptr[nid]
        n_out = graph.out_ptr[nid + 1] - graph.out_ptr[nid]
        here = n_in + 3 * n_out + 4
        if layout.chunk_class >= 0:
            for e in range(graph.out_ptr[nid], graph.out_ptr[nid + 1]):
                here += 3 * (layout.width[graph.outs[e]] - 1)
            for e in range(graph.uniq_ptr[nid], graph.uniq_ptr[nid + 1]):
                here = max(here, 3 * layout.width[graph.uniq_in[e]] + 1)
        need, most_in, most_out = max(need, here), max(most_in, n_in), max(most_out, n_out)
    return need, most_in, most_out


# The pass runs without numba's reference counting (_nrt=False): it allocates nothing (its
# buffers come from ``new_state``), so records pass between its helpers for free.
@numba.njit(cache=True, _nrt=False)
def scan(st, residents):
    """One pass over the schedule on ``st`` (``new_state``), with ``residents`` on the device at
    the start. Its fault code (``Instrs.fault``) says OK or why it stopped; what it emitted is in
    ``st.out``, where tensors ended in ``st.res`` and ``st.chunks``."""
    _place_residents(st, residents)
    for pos in range(st.order.schedule.shape[0]):
        _step(st, pos)
        if st.out.fault[FAULT_CODE] != OK:
            return
    _leave_state(st)


@numba.njit(cache=True, inline="always")
def _place_residents(st, residents):
    """Resident state into its objects; every other object on its class's free ring; host copies
    given at the start marked current; each tensor's first read; the max-trees' leaves."""
    g, layout, res, tensors, free, tree = st.graph, st.layout, st.res, st.tensors, st.free, st.tree
    class_first = layout.class_first
    for k in range(class_first.shape[0] - 1 if tree.val.shape[0] else 0):
        base, size = tree.base[k], tree.size[k]
        for o in range(class_first[k], class_first[k + 1]):
            tree.obj[base + size + o - class_first[k]] = o
        for i in range(size - 1, 0, -1):
            tree.obj[base + i] = tree.obj[base + 2 * i]
    for t in range(g.nbytes.shape[0]):
        r0, r1 = st.order.read_ptr[t], st.order.read_ptr[t + 1]
        tensors.next_read[t] = st.order.reads[r0] if r1 > r0 else st.order.after_reads[t]
    for r in range(residents.tensor.shape[0]):
        t, o = residents.tensor[r], residents.obj[r]
        if layout.klass[t] == layout.chunk_class:        # back in the chunks where its next value ended
            for j in range(residents.chunk_ptr[r + 1] - residents.chunk_ptr[r]):
                st.chunks.held[layout.slot_ptr[t] + j] = residents.chunks[residents.chunk_ptr[r] + j]
            o = _new_placement(st, t)
        _settle(st, t, o)
        res.home_of[t] = o
    for t in range(g.nbytes.shape[0]):
        if g.host_at_start[t] and res.home_of[t] < 0:
            tensors.host_writer[t] = -1
    for q in range(g.state_cur.shape[0]):
        if g.state_cur[q] == g.state_nxt[q]:    # state nothing updates: its host copy stays current
            tensors.host_writer[g.state_cur[q]] = -1
    for k in range(class_first.shape[0] - 1):
        for o in range(class_first[k], class_first[k + 1]):
            if res.tenant[o] < 0:
                free.clean[class_first[k] + free.clean_size[k]] = o
                free.clean_size[k] += 1


@numba.njit(cache=True, inline="always")
def _step(st, pos):
    """Run step ``pos``: bring its inputs in, place its outputs, emit the compute, free what
    died, evict ahead. Returns early with a fault set."""
    g, out = st.graph, st.out
    nid = st.order.schedule[pos]
    i0, i1 = g.in_ptr[nid], g.in_ptr[nid + 1]
    o0, o1 = g.out_ptr[nid], g.out_ptr[nid + 1]
    busy = st.tensors.busy
    for e in range(i0, i1):
        busy[g.ins[e]] = True
    for e in range(o0, o1):
        busy[g.outs[e]] = True
    _bring_inputs(st, pos, nid)
    if out.fault[FAULT_CODE] != OK:
        return
    for e in range(i0, i1):
        st.scratch.in_objs[e - i0] = st.res.obj_of[g.ins[e]]
    n_dying = _place_outputs(st, pos, nid, _dying_inputs(st, nid))
    if out.fault[FAULT_CODE] != OK:
        return
    i = _emit_compute(st, nid)
    if out.fault[FAULT_CODE] != OK:
        return
    _after_compute(st, pos, nid, i, n_dying)
    for e in range(i0, i1):
        busy[g.ins[e]] = False
    for e in range(o0, o1):
        busy[g.outs[e]] = False
    if st.rules.evict_ahead:
        _keep_headroom(st, pos, nid)


@numba.njit(cache=True, inline="always")
def _bring_inputs(st, pos, nid):
    """Bring in the inputs of node nid that are not resident: swapped in from their host copy,
    or recomputed where the pass dropped them (``_recover``)."""
    g = st.graph
    for e in range(g.uniq_ptr[nid], g.uniq_ptr[nid + 1]):
        t = g.uniq_in[e]
        if st.res.obj_of[t] >= 0:
            continue
        if st.tensors.host_writer[t] != NOT_HOST:
            _swap_in(st, t, pos)
        elif _recomputes(st.rules):
            _recover(st, t, pos)
        else:
            _fault(st, NOT_ON_HOST, pos, t)
        if st.out.fault[FAULT_CODE] != OK:
            return


@numba.njit(cache=True, _nrt=False)     # called, not inlined: see "Compile time" above
def _swap_in(st, t, pos):
    """Copy t in from its host copy into an object of its class (evicting if none is free)."""
    tensors, cand = st.tensors, st.scratch.cand
    o = _acquire(st, t, pos, False)
    if o < 0:
        return
    arr, a, b = _settle(st, t, o)
    cand[0] = tensors.host_writer[t]
    c = 1
    for j in range(a, b):
        c = _releases(st, c, arr[j])
    i = _emit(st, SWAP_IN, t, o, True, c)
    release = st.res.release
    for j in range(a, b):
        release[arr[j], COMPUTE], release[arr[j], SWAP_IN], release[arr[j], SWAP_OUT] = -1, i, -1
    tensors.writer[t] = i


@numba.njit(cache=True, inline="always")
def _recomputes(rules):
    return rules.recompute > 0 or rules.recompute_only


@numba.njit(cache=True, inline="always")
def _alive_until(st, z, r):
    """Whether tensor z stays readable up to step r without this chain recreating it: kept to
    the end, or read at r or later (then, anchored, it is resident or copied out at r, or if it
    is dropped now, recreated by its own chain)."""
    order = st.order
    n = order.read_ptr[z + 1] - order.read_ptr[z]
    return st.graph.kept[z] or (n > 0 and order.reads[order.read_ptr[z + 1] - 1] >= r)


@numba.njit(cache=True, _nrt=False)     # called, not inlined: see "Compile time" above
def _chain_cost(st, x, pos):
    """Whether resident x, whose host copy is stale, may be dropped at step pos and recomputed
    at its next read: the seconds that recreating it costs (its chain of producers, and the
    copies in of what the chain reads from the host), or -1. A chain recreates x from tensors
    available at that read (``_alive_until``, or with a current host copy); a tensor that will
    be gone is recreated too, up to ``max_chain`` nodes, each a recomputable node. Also returns
    how many bases (tensors the chain reads that must stay available) it left in ``Chain.bases``."""
    g, order, tensors, chain = st.graph, st.order, st.tensors, st.chain
    if g.kept[x] or not order.may_drop[x] or (tensors.anchor[x] >= pos and not st.rules.recompute_only):
        return -1.0, 0
    r = tensors.next_read[x]
    if r >= order.schedule.shape[0]:
        return -1.0, 0
    horizon = _horizon(st, x)
    chain.stamp[0] += 1
    stamp = chain.stamp[0]
    stack, mark = chain.stack, chain.mark
    stack[0] = x
    mark[x] = stamp
    depth, n_bases, cost = 1, 0, 0.0
    members = 0
    link = st.rules.link
    while depth > 0:
        depth -= 1
        y = stack[depth]
        p = g.producer[y]
        if p < 0 or not order.recomputable[p]:
            return -1.0, 0
        if members >= st.rules.max_chain:
            return -1.0, 0
        chain.members[members] = y
        members += 1
        cost += order.node_s[p]
        for e in range(g.uniq_ptr[p], g.uniq_ptr[p + 1]):
            z = g.uniq_in[e]
            if mark[z] == stamp:
                continue
            mark[z] = stamp
            if tensors.host_writer[z] != NOT_HOST:         # a base too: held while the chain runs
                if st.res.obj_of[z] < 0 and link > 0:
                    cost += g.nbytes[z] / link
                chain.bases[n_bases] = z
                n_bases += 1
            elif _alive_until(st, z, horizon) and (st.res.obj_of[z] >= 0 or not st.rules.through_dropped):
                chain.bases[n_bases] = z
                n_bases += 1
            else:       # gone by r (or dropped now, with through_dropped): recreated in this chain
                stack[depth] = z
                depth += 1
    if not _chain_fits(st, x, r, members, n_bases):
        return -1.0, 0
    return cost, n_bases


@numba.njit(cache=True, inline="always")
def _chain_fits(st, x, r, members, n_bases):
    """Whether recreating x's chain for step r fits its size classes: the chain's tensors (which
    may all be held at once), the other outputs of its nodes, and the tensors of r's node (busy
    then) in each class's objects.
    Counted in ``Chain.need`` (the first sweep), then checked and cleared (the second)."""
    g, chain = st.graph, st.chain
    mark, stamp = chain.mark, chain.stamp[0]
    nid = st.order.schedule[r]
    fits = True
    for sweep in range(2):
        for j in range(members + n_bases):
            u = chain.members[j] if j < members else chain.bases[j - members]
            fits = _count_need(st, u, sweep) and fits
        for j in range(members):        # a member's siblings: its producer writes them too
            p = g.producer[chain.members[j]]
            for e in range(g.out_ptr[p], g.out_ptr[p + 1]):
                u = g.outs[e]
                if sweep == 1 or mark[u] != stamp:
                    mark[u] = stamp
                    fits = _count_need(st, u, sweep) and fits
        for e in range(g.in_ptr[nid], g.in_ptr[nid + 1]):
            u = g.ins[e]
            if sweep == 1 or mark[u] != stamp:      # not counted yet
                mark[u] = stamp
                fits = _count_need(st, u, sweep) and fits
        for e in range(g.out_ptr[nid], g.out_ptr[nid + 1]):
            u = g.outs[e]
            if sweep == 1 or mark[u] != stamp:
                mark[u] = stamp
                fits = _count_need(st, u, sweep) and fits
    return fits


@numba.njit(cache=True, inline="always")
def _count_need(st, u, sweep):
    """Sweep 0: add tensor u's objects to its class's need (True). Sweep 1: whether its class's
    need fits the class, clearing it."""
    layout, need = st.layout, st.chain.need
    k = layout.klass[u]
    if sweep == 0:
        need[k] += layout.width[u]
        return True
    fits = need[k] <= layout.class_first[k + 1] - layout.class_first[k]
    need[k] = 0
    return fits


@numba.njit(cache=True, _nrt=False)     # called, not inlined: see "Compile time" above
def _drops(st, x, pos):
    """Whether evicting x (host copy stale) at step pos drops it for recomputation instead of
    copying it out: allowed (``_chain_cost``) and, unless recomputing only, cheaper than the copy
    out and back in, the copy out waiting behind the link's backlog. Dropping anchors the
    chain's bases until x's next read."""
    rules = st.rules
    cost, n_bases = _chain_cost(st, x, pos)
    if cost < 0:
        return False
    if not rules.recompute_only:
        if rules.link <= 0:
            return False
        now = st.order.step_end[pos - 1] if pos > 0 else 0.0
        travel = st.graph.nbytes[x] / rules.link
        wait = max(0.0, st.chain.out_free[0] - now)
        if not cost < rules.recompute * (2.0 * travel + wait):
            return False
    horizon = _horizon(st, x)
    for j in range(n_bases):
        z = st.chain.bases[j]
        st.tensors.anchor[z] = max(st.tensors.anchor[z], horizon)
    return True


@numba.njit(cache=True, inline="always")
def _horizon(st, x):
    """The last step at which dropped x may have to be recreated: its next read, or, recomputing
    only, where a chain anchored on it reads it (anchored tensors may be dropped then too, their
    own chains' bases anchored that long)."""
    return max(st.tensors.next_read[x], st.tensors.anchor[x])


@numba.njit(cache=True, _nrt=False)     # called, not inlined: see "Compile time" above
def _recover(st, t, pos):
    """Recreate dropped t for step pos: walk its chain depth first, bringing each producer's
    inputs in (swapped in from a host copy, or recreated first), then recompute the producer
    into an object of its own. A tensor brought in for a recomputation stays busy until that
    recomputation has run (so recreating a sibling input cannot evict it); then it is released,
    and freed if nothing reads it any more. Recreating evicts, and what it evicts may be needed
    again by the same chain: past RECOVERY_LIMIT times ``max_chain`` recomputations the class is
    too small for the chain (a NEEDS_MORE_OBJECTS fault), not worth a plan that thrashes."""
    g, res, tensors, chain = st.graph, st.res, st.tensors, st.chain
    stack, held = chain.todo, chain.held
    busy = tensors.busy
    recomputed = 0
    depth = 1
    stack[0] = t
    while depth > 0:
        y = stack[depth - 1]
        if res.obj_of[y] < 0 and tensors.host_writer[y] != NOT_HOST:
            _swap_in(st, y, pos)
        elif res.obj_of[y] < 0:
            p = g.producer[y]
            if p < 0 or not st.order.recomputable[p] or depth >= stack.shape[0]:
                _fault(st, NOT_ON_HOST, pos, y)
                return
            pending = -1
            for e in range(g.uniq_ptr[p], g.uniq_ptr[p + 1]):
                z = g.uniq_in[e]
                if res.obj_of[z] < 0:
                    pending = z
                elif not busy[z]:           # resident already: keep it for this recomputation
                    busy[z] = True
                    held[z] = True
            if pending >= 0:
                stack[depth] = pending
                depth += 1
                continue
            recomputed += 1
            if recomputed > RECOVERY_LIMIT * st.rules.max_chain:
                _fault(st, NEEDS_MORE_OBJECTS, pos, st.layout.klass[t])
                return
            _recompute(st, p, y, pos)
            if st.out.fault[FAULT_CODE] != OK:
                return
            for e in range(g.uniq_ptr[p], g.uniq_ptr[p + 1]):
                z = g.uniq_in[e]
                if held[z]:
                    held[z] = False
                    busy[z] = False
                    if not g.kept[z] and not g.stays[z] and \
                            tensors.read_no[z] >= st.order.read_ptr[z + 1] - st.order.read_ptr[z]:
                        _free(st, z)        # recreated for the chain only
        if st.out.fault[FAULT_CODE] != OK:
            return
        if y != t and not busy[y]:          # read by the recomputation below it on the stack
            busy[y] = True
            held[y] = True
        depth -= 1


@numba.njit(cache=True, inline="always")
def _recompute(st, p, y, pos):
    """Run node p again to recreate its output y (its inputs are resident): a compute flagged as
    a recomputation, after its inputs' writers and its objects' releases. Its other outputs are
    written too: a resident one over itself (the same bits, after its readers so far), any other
    into an object of its own, kept if it is read later (recreated for free), else freed."""
    g, res, tensors = st.graph, st.res, st.tensors
    busy, held = tensors.busy, st.chain.held
    o0, o1 = g.out_ptr[p], g.out_ptr[p + 1]
    for e in range(o0, o1):         # resident siblings stay put while the others take objects
        u = g.outs[e]
        if res.obj_of[u] >= 0 and not busy[u]:
            busy[u] = True
            held[u] = True
    failed = False
    for e in range(o0, o1):
        u = g.outs[e]
        o = res.obj_of[u]
        if o < 0:
            o = _acquire(st, u, pos, True)
            if o < 0:
                failed = True
                break
        st.scratch.out_objs[e - o0] = o
    i = -1
    if not failed:
        i0, i1 = g.in_ptr[p], g.in_ptr[p + 1]
        for e in range(i0, i1):
            st.scratch.in_objs[e - i0] = res.obj_of[g.ins[e]]
        i = _emit_compute(st, p)
    for e in range(o0, o1):
        u = g.outs[e]
        if held[u]:
            held[u] = False
            busy[u] = False
    if i < 0 or st.out.fault[FAULT_CODE] != OK:
        return
    st.out.recompute[i] = True
    release = res.release
    for e in range(g.uniq_ptr[p], g.uniq_ptr[p + 1]):
        arr, a, b = _span(st, g.uniq_in[e])
        for j in range(a, b):
            release[arr[j], COMPUTE] = i
    for e in range(o0, o1):
        u = g.outs[e]
        arr, a, b = _settle(st, u, st.scratch.out_objs[e - o0])
        for j in range(a, b):
            release[arr[j], COMPUTE], release[arr[j], SWAP_IN], release[arr[j], SWAP_OUT] = i, -1, -1
        tensors.writer[u] = i
        if u != y and tensors.next_read[u] >= st.order.schedule.shape[0] and not g.kept[u] and not g.stays[u]:
            _free(st, u)            # written for nothing


@numba.njit(cache=True, inline="always")
def _dying_inputs(st, nid):
    """Put node nid's inputs read for the last time here (in input order, not kept) in the
    step scratch's ``dying``; how many."""
    g, tensors, dying = st.graph, st.tensors, st.scratch.dying
    n_dying = 0
    for e in range(g.uniq_ptr[nid], g.uniq_ptr[nid + 1]):
        t = g.uniq_in[e]
        if tensors.read_no[t] + 1 >= st.order.read_ptr[t + 1] - st.order.read_ptr[t] and not g.kept[t]:
            dying[n_dying] = t
            n_dying += 1
    return n_dying


@numba.njit(cache=True, inline="always")
def _place_outputs(st, pos, nid, n_dying):
    """An object for each output of node nid (the step scratch's ``out_objs``): the input's
    object where the in-place rule writes it over a dying input (which then leaves ``dying``),
    else an object of its class. The number of inputs still dying."""
    g, layout, res, chunks = st.graph, st.layout, st.res, st.chunks
    dying, in_objs, out_objs = st.scratch.dying, st.scratch.in_objs, st.scratch.out_objs
    i0, o0 = g.in_ptr[nid], g.out_ptr[nid]
    for k in range(g.out_ptr[nid + 1] - o0):
        t = g.outs[o0 + k]
        src = st.order.in_place[o0 + k]
        if src < 0:
            o = _acquire(st, t, pos, True)
            if o < 0:
                return n_dying
            out_objs[k] = o
            continue
        x = g.ins[i0 + src]
        at = -1
        for d in range(n_dying):
            if dying[d] == x:
                at = d
        if at < 0:                  # the in-place rule and this pass disagree on x dying here
            _fault(st, IN_PLACE_NOT_DYING, pos, x)
            return n_dying
        for d in range(at, n_dying - 1):
            dying[d] = dying[d + 1]
        n_dying -= 1
        arr, a, b = _span(st, x)
        for j in range(a, b):
            res.tenant[arr[j]] = -1
        _tree_set(st, _key_object(st, x), -np.inf)
        if layout.klass[t] == layout.chunk_class:       # its chunks and placement
            for j in range(layout.width[t]):
                chunks.held[layout.slot_ptr[t] + j] = chunks.held[layout.slot_ptr[x] + j]
        res.obj_of[x] = -1
        out_objs[k] = in_objs[src]
    return n_dying


@numba.njit(cache=True, _nrt=False)     # called, not inlined: see "Compile time" above
def _emit_compute(st, nid):
    """Emit node nid's compute, depending on its inputs' writers and its outputs' objects'
    releases, with the objects it touches (inputs, then outputs); its index."""
    g, layout, out = st.graph, st.layout, st.out
    cand, in_objs, out_objs = st.scratch.cand, st.scratch.in_objs, st.scratch.out_objs
    i0, i1 = g.in_ptr[nid], g.in_ptr[nid + 1]
    o0, o1 = g.out_ptr[nid], g.out_ptr[nid + 1]
    c = 0
    for e in range(i0, i1):
        cand[c] = st.tensors.writer[g.ins[e]]
        c += 1
    for k in range(o1 - o0):
        t = g.outs[o0 + k]
        if layout.klass[t] == layout.chunk_class:
            for j in range(layout.slot_ptr[t], layout.slot_ptr[t] + layout.width[t]):
                c = _releases(st, c, st.chunks.held[j])
        else:
            c = _releases(st, c, out_objs[k])
    i = _emit(st, COMPUTE, nid, -1, True, c)
    n_in, n_out = i1 - i0, o1 - o0
    at = out.n_objects[0]
    if i < 0:
        return i
    if at + n_in + n_out > out.objects.shape[0]:
        _fault(st, BUFFER_FULL, -1, OBJECTS_BUFFER)
        return i
    out.obj_count[i] = n_in + n_out
    for e in range(n_in):
        out.objects[at + e] = in_objs[e]
    for k in range(n_out):
        out.objects[at + n_in + k] = out_objs[k]
    out.n_objects[0] = at + n_in + n_out
    return i


@numba.njit(cache=True, inline="always")
def _after_compute(st, pos, nid, i, n_dying):
    """After compute i of node nid at step pos: its inputs' reads advance and their objects are
    released by it, its outputs settle in their objects, and what died is freed."""
    g, order, res, tensors = st.graph, st.order, st.res, st.tensors
    release, next_read = res.release, tensors.next_read
    for e in range(g.uniq_ptr[nid], g.uniq_ptr[nid + 1]):
        t = g.uniq_in[e]
        tensors.read_no[t] += 1
        r = order.read_ptr[t] + tensors.read_no[t]
        next_read[t] = order.reads[r] if r < order.read_ptr[t + 1] else order.after_reads[t]
        tensors.last_touch[t] = pos
        if res.obj_of[t] >= 0:
            arr, a, b = _span(st, t)
            for j in range(a, b):
                release[arr[j], COMPUTE] = i
                res.next_use_at[arr[j]] = order.use_time[next_read[t]]
            _tree_set(st, _key_object(st, t), _tree_key(st, t))
    o0, o1 = g.out_ptr[nid], g.out_ptr[nid + 1]
    for k in range(o1 - o0):
        t = g.outs[o0 + k]
        arr, a, b = _settle(st, t, st.scratch.out_objs[k])
        for j in range(a, b):
            release[arr[j], COMPUTE], release[arr[j], SWAP_IN], release[arr[j], SWAP_OUT] = i, -1, -1
        tensors.writer[t] = i
        tensors.last_touch[t] = pos
    # Inputs that die are freed in reverse input order, then outputs nothing reads.
    dying = st.scratch.dying
    for d in range(n_dying - 1, -1, -1):
        t = dying[d]
        if not g.stays[t]:
            _free(st, t)
    for e in range(o0, o1):
        t = g.outs[e]
        if order.read_ptr[t + 1] == order.read_ptr[t] and not g.kept[t]:
            _free(st, t)


@numba.njit(cache=True, inline="always")
def _keep_headroom(st, pos, nid):
    """Evict ahead of need in each class node nid touched, ascending."""
    g, layout, tree, free = st.graph, st.layout, st.tree, st.free
    classes, class_seen_at = st.scratch.classes, st.scratch.class_seen_at
    i0, i1 = g.in_ptr[nid], g.in_ptr[nid + 1]
    o0, o1 = g.out_ptr[nid], g.out_ptr[nid + 1]
    n_cls_here = 0
    for e in range(i0, i1 + o1 - o0):
        t = g.ins[e] if e < i1 else g.outs[o0 + e - i1]
        kt = layout.klass[t]
        if class_seen_at[kt] != pos:
            class_seen_at[kt] = pos
            classes[n_cls_here] = kt
            n_cls_here += 1
    _insertion_sort(classes, n_cls_here)
    now = st.order.step_end[pos]
    end = st.order.schedule.shape[0]
    for q in range(n_cls_here):
        k = classes[q]
        # Most steps stop here: the class has its headroom, or its furthest tenant (the
        # root of its max-tree; those kept to the end aside) comes back too soon to leave.
        root = tree.base[k] + 1
        if layout.headroom[k] <= free.clean_size[k] + free.dirty_size[k] or tree.val[root] == -np.inf:
            continue
        first = st.res.tenant[tree.obj[root]]
        r = st.tensors.next_read[first]
        if r < end and _too_soon(st, first, r, pos, now):
            continue
        _evict_ahead(st, pos, k)
        if st.out.fault[FAULT_CODE] != OK:
            return


@numba.njit(cache=True, inline="always")
def _leave_state(st):
    """State leaving: a next value not back in its home object is written to the host; resident
    state whose next value strayed from its home is marked (``Residency.strayed``)."""
    g, res, tensors, cand = st.graph, st.res, st.tensors, st.scratch.cand
    for q in range(g.state_cur.shape[0]):
        cur, nxt = g.state_cur[q], g.state_nxt[q]
        home = res.home_of[cur]
        if home >= 0 and res.obj_of[nxt] == home:
            continue
        if home >= 0:
            res.strayed[q] = True
        if tensors.host_writer[nxt] == NOT_HOST:
            cand[0] = tensors.writer[nxt]
            tensors.host_writer[nxt] = _emit(st, SWAP_OUT, nxt, res.obj_of[nxt], True, 1)


@numba.njit(cache=True, inline="always")
def _fault(st, code, pos, subject):
    fault = st.out.fault
    fault[FAULT_CODE], fault[FAULT_STEP], fault[FAULT_SUBJECT] = code, pos, subject


@numba.njit(cache=True, inline="always")
def _emit(st, kind, target, obj, copy, n_cand):
    """Append an instruction whose dependencies are the step scratch's candidates cand[:n_cand]
    (those >= 0, sorted, unique); its index, or -1 with a BUFFER_FULL fault."""
    out, cand = st.out, st.scratch.cand
    n = out.count[0]
    if n >= out.kind.shape[0]:
        _fault(st, BUFFER_FULL, -1, INSTRS_BUFFER)
        return -1
    e = out.dep_ptr[n]
    if e + n_cand > out.deps.shape[0]:
        _fault(st, BUFFER_FULL, -1, DEPS_BUFFER)
        return -1
    out.kind[n] = kind
    out.target[n] = target
    out.obj[n] = obj
    out.copy[n] = copy
    if n_cand > 32:                     # a chunked tensor's releases
        _heap_sort(cand, n_cand)
    else:                               # a handful of candidates
        _insertion_sort(cand, n_cand)
    last = -1
    for a in range(n_cand):
        x = cand[a]
        if x >= 0 and x != last:
            out.deps[e] = x
            e += 1
            last = x
    out.dep_ptr[n + 1] = e
    out.count[0] = n + 1
    return n


@numba.njit(cache=True, inline="always")
def _releases(st, c, o):
    """Append object o's three releases to the candidates cand[:c] of the next instruction; the
    new count. Skips none (-1) and those already candidates of it (``seen[x] == n``), so that a
    chunked tensor's chunks, released by a few instructions, add a few candidates rather than
    three per chunk."""
    cand, seen, release = st.scratch.cand, st.out.seen, st.res.release
    n = st.out.count[0]
    for s in range(3):
        x = release[o, s]
        if x >= 0 and seen[x] != n:
            seen[x] = n
            cand[c] = x
            c += 1
    return c


@numba.njit(cache=True, inline="always")
def _span(st, t):
    """The objects resident tensor t sits in, as (array, first, end): its chunks for the chunk
    class, else its one object (``obj_of[t]``)."""
    layout = st.layout
    if layout.klass[t] == layout.chunk_class:
        return st.chunks.held, layout.slot_ptr[t], layout.slot_ptr[t] + layout.width[t]
    return st.res.obj_of, t, t + 1


@numba.njit(cache=True, inline="always")
def _settle(st, t, o):
    """Make t the tenant of object o (for the chunk class: placement o, on the chunks it holds),
    with its next use and Belady key; the span of its objects (``_span``)."""
    res = st.res
    res.obj_of[t] = o
    next_use = st.order.use_time[st.tensors.next_read[t]]
    arr, a, b = _span(st, t)
    lowest = arr[a]
    for j in range(a, b):
        res.tenant[arr[j]] = t
        res.next_use_at[arr[j]] = next_use
        lowest = min(lowest, arr[j])
    st.chunks.key_chunk[t] = lowest
    _tree_set(st, lowest, _tree_key(st, t))
    return arr, a, b


@numba.njit(cache=True, inline="always")
def _key_object(st, t):
    """The object that holds resident t's key in its class's max-tree: its object, or for the
    chunk class its lowest chunk (set by ``_settle``)."""
    return st.chunks.key_chunk[t] if st.layout.klass[t] == st.layout.chunk_class else st.res.obj_of[t]


@numba.njit(cache=True, _nrt=False)     # called, not inlined: see "Compile time" above
def _new_placement(st, t):
    """Record t's chunks (held) as a new placement; its object id (past the layout's objects)."""
    chunks, layout = st.chunks, st.layout
    j = chunks.n_placements[0]
    base = chunks.placement_ptr[j]
    w = layout.width[t]
    if j + 1 >= chunks.placement_ptr.shape[0]:
        _fault(st, BUFFER_FULL, -1, PLACEMENTS_BUFFER)
        return chunks.n_layout_objects + j
    if base + w > chunks.placement_chunks.shape[0]:
        _fault(st, BUFFER_FULL, -1, PLACEMENT_CHUNKS_BUFFER)
        return chunks.n_layout_objects + j
    for i in range(w):
        chunks.placement_chunks[base + i] = chunks.held[layout.slot_ptr[t] + i]
    chunks.placement_ptr[j + 1] = base + w
    chunks.n_placements[0] = j + 1
    return chunks.n_layout_objects + j


@numba.njit(cache=True, inline="always")
def _free(st, t):
    """Give back the objects of t, which dies (clean: nothing to copy out)."""
    res = st.res
    _tree_set(st, _key_object(st, t), -np.inf)
    arr, a, b = _span(st, t)
    _push_free_from(st, arr, a, b, st.layout.object_class[arr[a]], False)
    for j in range(a, b):
        res.tenant[arr[j]] = -1
    res.obj_of[t] = -1


@numba.njit(cache=True, inline="always")
def _evict(st, victim, pos):
    """Take victim off the device at step pos: copying it out if its host copy is stale, unless
    it is dropped to be recomputed (``_drops``); (its object, whether a copy out was emitted: its
    objects are dirty until it ends). Its objects are not put back on a free ring
    (``_push_objects``)."""
    res, tensors = st.res, st.tensors
    o = res.obj_of[victim]
    arr, a, b = _span(st, victim)
    dirty = False
    # _drops is called, not inlined: test the rules here so a swap-only pass never pays the call
    if tensors.host_writer[victim] == NOT_HOST and not (_recomputes(st.rules) and _drops(st, victim, pos)):
        st.scratch.cand[0] = tensors.writer[victim]
        i = _emit(st, SWAP_OUT, victim, o, True, 1)
        tensors.host_writer[victim] = i
        dirty = True
        for j in range(a, b):
            res.release[arr[j], SWAP_OUT] = i
        if st.rules.link > 0:       # the d2h stream's backlog, in compute-only time
            now = st.order.step_end[pos - 1] if pos > 0 else 0.0
            st.chain.out_free[0] = max(st.chain.out_free[0], now) + st.graph.nbytes[victim] / st.rules.link
    for j in range(a, b):
        res.tenant[arr[j]] = -1
    _tree_set(st, _key_object(st, victim), -np.inf)
    res.obj_of[victim] = -1
    return o, dirty


@numba.njit(cache=True, _nrt=False)     # called, not inlined: see "Compile time" above
def _push_objects(st, t, o, k, dirty):
    """Put the objects evicted tensor t sat in (its chunks, or o) on class k's free ring; how many."""
    layout = st.layout
    if layout.klass[t] != layout.chunk_class:
        _push_free(st, o, k, dirty)
        return 1
    _push_free_from(st, st.chunks.held, layout.slot_ptr[t], layout.slot_ptr[t] + layout.width[t], k, dirty)
    return layout.width[t]


@numba.njit(cache=True, inline="always")
def _take_chunks(st, t, pos, for_output):
    """width[t] free chunks for t (into held), evicting residents of the chunk class (Belady, as
    ``_acquire``) until enough are free; a NEEDS_MORE_OBJECTS fault when every resident is busy."""
    layout = st.layout
    k = layout.chunk_class
    base, w = layout.slot_ptr[t], layout.width[t]
    got = 0
    while True:
        got += _pop_free_into(st, k, for_output, st.chunks.held, base + got, w - got)
        if got == w:
            return
        victim = _victim(st, t, k, pos)
        if victim < 0:
            _fault(st, NEEDS_MORE_OBJECTS, pos, k)
            return
        o, dirty = _evict(st, victim, pos)
        _push_objects(st, victim, o, k, dirty)


@numba.njit(cache=True, inline="always")
def _acquire(st, t, pos, for_output):
    """A free object of t's class (``_pop_free``), evicting a resident tensor if none is free;
    -1 with a fault set when every object of the class is busy. For the chunk class, the
    placement of the chunks it takes (``_take_chunks``)."""
    k = st.layout.klass[t]
    if k == st.layout.chunk_class:
        _take_chunks(st, t, pos, for_output)
        return -1 if st.out.fault[FAULT_CODE] != OK else _new_placement(st, t)
    o = _pop_free(st, k, for_output)
    if o >= 0:
        return o
    best = _victim(st, t, k, pos)
    if best < 0:
        _fault(st, NEEDS_MORE_OBJECTS, pos, k)
        return -1
    o, _ = _evict(st, best, pos)
    return o


@numba.njit(cache=True, inline="always")
def _victim(st, t, k, pos):
    """The resident tensor of class k to evict to make room for t, or -1 when every one is busy:
    ``evicts_first`` by next use (Belady) among those idle for at least the threshold, or by
    last use (LRU, for on-demand swapping)."""
    rules, tenant = st.rules, st.res.tenant
    busy, last_touch, step_end = st.tensors.busy, st.tensors.last_touch, st.order.step_end
    lo, hi = st.layout.class_first[k], st.layout.class_first[k + 1]
    now = step_end[pos - 1] if pos > 0 else 0.0
    best = -1
    if rules.victim == LRU:
        best_key = 0
        for o in range(lo, hi):
            x = tenant[o]
            if x >= 0 and not busy[x] and evicts_first(-last_touch[x], x, best_key, best):
                best, best_key = x, -last_touch[x]
        return best
    threshold = rules.threshold_s
    if threshold < 0:
        threshold = st.graph.nbytes[t] / rules.link if rules.link > 0 else 0.0
    any_idle = False
    for o in range(lo, hi):
        x = tenant[o]
        if x >= 0 and not busy[x] and not rules.recompute_only:
            tx = last_touch[x]
            if tx < 0 or now - step_end[max(tx, 0)] >= threshold:
                any_idle = True
                break
    next_use_at = st.res.next_use_at
    best_far = -np.inf
    for o in range(lo, hi):
        far = next_use_at[o] - now
        if far < best_far:           # the common case: no better than the best so far
            continue
        x = tenant[o]
        if x < 0 or busy[x]:
            continue
        if rules.recompute_only and st.tensors.host_writer[x] == NOT_HOST and _chain_cost(st, x, pos)[0] < 0:
            continue                # recomputing only: nothing is copied out
        if any_idle:
            tx = last_touch[x]
            if not (tx < 0 or now - step_end[max(tx, 0)] >= threshold):
                continue
        if evicts_first(far, x, best_far, best):
            best, best_far = x, far
    return best


@numba.njit(cache=True, inline="always")
def _evict_ahead(st, pos, k):
    """Keep class k's headroom free: of the ``want`` tenants used furthest ahead (ties: object
    order), evict those whose next use leaves time to swap them out and back, stopping at the
    first that comes back too soon. Tenants kept to the end (a state's next value, the loss)
    never leave here but take their place in that order: after those never used again, before
    the rest; the class's max-tree holds the others in order. With kept_ahead no tenant's next
    use equals ``key_end``, and those kept to the end are in the tree like the rest."""
    tree, tenant, tensors = st.tree, st.res.tenant, st.tensors
    want = st.layout.headroom[k] - st.free.clean_size[k] - st.free.dirty_size[k]
    lo, hi = st.layout.class_first[k], st.layout.class_first[k + 1]
    end = st.key_end
    now = st.order.step_end[pos]
    root = tree.base[k] + 1
    kept_counted = False
    while want > 0 and tree.val[root] != -np.inf:
        if tree.val[root] != np.inf and not kept_counted:
            kept_counted = True
            for o in range(lo, hi):
                if tenant[o] >= 0 and (tensors.next_read[tenant[o]] == end or tensors.pinned[tenant[o]]):
                    want -= 1
            if want <= 0:
                break
        t = tenant[tree.obj[root]]
        r = tensors.next_read[t]
        if r < end and _too_soon(st, t, r, pos, now):
            break
        o, dirty = _evict(st, t, pos)
        want -= _push_objects(st, t, o, k, dirty)


@numba.njit(cache=True, inline="always")
def _too_soon(st, t, r, pos, now):
    """Whether t, next read at step r, comes back too soon to be evicted ahead of need: its
    swap-out and swap-in back would not both fit before r (without a link: r is the next step)."""
    link = st.rules.link
    travel = st.graph.nbytes[t] / link if link > 0 else 0.0
    return st.order.use_time[r] - now < st.rules.ahead_gap * travel or (link <= 0 and r - pos < 2)


@numba.njit(cache=True, inline="always")
def _tree_set(st, o, value):
    """Set object o's Belady key in its class's max-tree (ties: the lower object)."""
    tree, layout = st.tree, st.layout
    if tree.val.shape[0] == 0:        # no tree: not evicting ahead
        return
    k = layout.object_class[o]
    i = tree.size[k] + o - layout.class_first[k]
    base = tree.base[k]
    val, obj = tree.val, tree.obj
    val[base + i] = value
    i //= 2
    while i >= 1:
        a, b = base + 2 * i, base + 2 * i + 1
        c = b if val[b] > val[a] else a
        if val[base + i] == val[c] and obj[base + i] == obj[c]:
            break                       # nothing above changes
        val[base + i], obj[base + i] = val[c], obj[c]
        i //= 2


@numba.njit(cache=True, inline="always")
def _tree_key(st, t):
    """A resident tensor's key in its class's max-tree: when it is next used; -inf (out of the
    tree) for a tensor kept to the end, which is never evicted ahead, and for state nothing
    updates (``pinned``: evicting it ahead only brings it back, this iteration or the next)."""
    r = st.tensors.next_read[t]
    return -np.inf if r == st.key_end or st.tensors.pinned[t] else st.order.use_time[r]


@numba.njit(cache=True, inline="always")
def _push_free(st, o, k, dirty):
    """Put object o of class k at the back of its class's free ring (``_push_free_from``)."""
    one = st.free.one
    one[0] = o
    _push_free_from(st, one, 0, 1, k, dirty)


@numba.njit(cache=True, _nrt=False)     # called, not inlined: see "Compile time" above
def _push_free_from(st, src, a, b, k, dirty):
    """Put objects src[a:b] of class k, in turn, at the back of its class's free ring: the dirty
    one when the copy out of their last tenant is still to finish, else the clean one."""
    free = st.free
    ring, head, size = (free.dirty, free.dirty_head, free.dirty_size) if dirty else \
        (free.clean, free.clean_head, free.clean_size)
    lo = st.layout.class_first[k]
    cap = st.layout.class_first[k + 1] - lo
    for j in range(a, b):
        o = src[j]
        ring[lo + (head[k] + size[k]) % cap] = o
        size[k] += 1
        free.freed_at[o] = free.clock[0]
        free.clock[0] += 1


@numba.njit(cache=True, inline="always")
def _pop_free(st, k, for_output):
    """A free object of class k, or -1 (``_pop_free_into``)."""
    one = st.free.one
    return one[0] if _pop_free_into(st, k, for_output, one, 0, 1) else -1


@numba.njit(cache=True, _nrt=False)     # called, not inlined: see "Compile time" above
def _pop_free_into(st, k, for_output, dest, at, count):
    """Up to ``count`` free objects of class k into dest[at:], one after another; how many
    (fewer when the class runs out). For a swap-in, the one freed earliest (the copy into it
    can start soonest). For a compute's output (with ``newest_for_outputs``), the one a compute
    freed last: its release lies earlier on the compute stream, so the output waits for
    nothing, and the objects freed long ago stay free for swap-ins to start early; a dirty one
    (its copy out still running) only when no clean one is left."""
    free = st.free
    ring, head, size = free.clean, free.clean_head, free.clean_size
    ring2, head2, size2, freed_at = free.dirty, free.dirty_head, free.dirty_size, free.freed_at
    newest = st.rules.newest_for_outputs
    lo = st.layout.class_first[k]
    cap = st.layout.class_first[k + 1] - lo
    got = 0
    while got < count and (size[k] > 0 or size2[k] > 0):
        if for_output and newest and size[k] > 0:
            size[k] -= 1
            o = ring[lo + (head[k] + size[k]) % cap]
        elif size[k] > 0 and (size2[k] == 0 or freed_at[ring[lo + head[k]]] < freed_at[ring2[lo + head2[k]]]):
            o = ring[lo + head[k]]
            head[k] = (head[k] + 1) % cap
            size[k] -= 1
        else:
            o = ring2[lo + head2[k]]
            head2[k] = (head2[k] + 1) % cap
            size2[k] -= 1
        dest[at + got] = o
        got += 1
    return got


@numba.njit(cache=True, inline="always")
def _insertion_sort(a, n):
    """Sort a[:n] in place (a few elements)."""
    for i in range(1, n):
        x = a[i]
        j = i - 1
        while j >= 0 and a[j] > x:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = x


@numba.njit(cache=True, inline="always")
def _heap_sort(a, n):
    """Sort a[:n] in place (numpy's sort allocates, which the pass may not)."""
    for start in range(n // 2 - 1, -1, -1):
        _sift_down(a, start, n)
    for end in range(n - 1, 0, -1):
        a[0], a[end] = a[end], a[0]
        _sift_down(a, 0, end)


@numba.njit(cache=True, inline="always")
def _sift_down(a, i, n):
    while True:
        child = 2 * i + 1
        if child >= n:
            return
        if child + 1 < n and a[child + 1] > a[child]:
            child += 1
        if a[i] >= a[child]:
            return
        a[i], a[child] = a[child], a[i]
        i = child
