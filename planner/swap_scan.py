"""One pass of the swap planner over the schedule, compiled (numba) over flat arrays.

``planner.swap_planner`` holds the rules in prose and drives the passes; this module is the
loop itself. It walks the schedule keeping which tensor sits in which object, and emits
instructions into preallocated arrays (their sizes are bounded: every swap-out evicts a
tensor a compute or swap-in placed). Names follow the planner's vocabulary: tenant (the
tensor in an object), release (per object and stream, the instruction after which the
object may be written), writer (the instruction that made a tensor resident), host writer
(the swap-out that wrote its host copy; -1 for a host copy given at the start, NOT_HOST
when the host copy is stale).

Speed (the search runs this for every candidate): helpers take their arrays as tuples (out,
pool, tree) so numba inlines them (a call with dozens of array arguments costs more than the
work), and evicting ahead asks a per-class max-tree for the furthest tenant instead of
scanning the class after every operator. The chunk class has thousands of objects and
tensors that take hundreds of them, so work per chunk is kept to plain array writes: a
chunked tensor's key sits in the max-tree at its lowest chunk only, an instruction's
candidate dependencies skip those it has already (a tensor's chunks were released by a few
instructions), long candidate lists are sorted by numpy, not by insertion, and the free rings
take and give a tensor's chunks in one call (numba counts references to every array a
helper unpacks from a tuple, on each call: per chunk, that cost more than the work).

The helpers (free rings, max-tree) stay in this file although it is long: numba's cache
(cache=True) is invalidated by a change to the caching function's own file only, so a helper
inlined from another module could leave a stale compiled scan behind after an edit.
"""
from __future__ import annotations

import numba
import numpy as np

COMPUTE, SWAP_IN, SWAP_OUT = 0, 1, 2
NOT_HOST = -2
# Error codes of a pass (the driver turns them into PlanError messages).
OK, NEEDS_MORE_OBJECTS, NOT_ON_HOST = 0, 1, 2


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
def _emit(out, n, kd, tg, ob, cp, cand, n_cand):
    """Append an instruction to ``out`` (kind, target, obj, copy, dep_ptr, deps) whose
    dependencies are cand[:n_cand] (those >= 0, sorted, unique)."""
    kind, target, obj, copy, dep_ptr, deps = out
    kind[n] = kd
    target[n] = tg
    obj[n] = ob
    copy[n] = cp
    if n_cand > 32:                     # a chunked tensor's releases
        cand[:n_cand].sort()
    else:                               # insertion sort: a handful of candidates
        for a in range(1, n_cand):
            x = cand[a]
            b = a - 1
            while b >= 0 and cand[b] > x:
                cand[b + 1] = cand[b]
                b -= 1
            cand[b + 1] = x
    e = dep_ptr[n]
    last = -1
    for a in range(n_cand):
        x = cand[a]
        if x >= 0 and x != last:
            deps[e] = x
            e += 1
            last = x
    dep_ptr[n + 1] = e
    return n + 1


@numba.njit(cache=True, inline="always")
def _releases(cand, c, release, o, seen, n):
    """Append object o's three releases to the candidates cand[:c] of instruction n; the new
    count. Skips none (-1) and those already candidates of n (``seen[x] == n``), so that a
    chunked tensor's chunks, released by a few instructions, add a few candidates rather than
    three per chunk."""
    for s in range(3):
        x = release[o, s]
        if x >= 0 and seen[x] != n:
            seen[x] = n
            cand[c] = x
            c += 1
    return c


@numba.njit(cache=True)
def scan(schedule, in_ptr, ins, uniq_ptr, uniq_in, out_ptr, outs, out_inplace, declares_inplace,
         nbytes, klass, kept, stays, host_at_start, state_cur, state_nxt,
         read_ptr0, reads, after_reads, step_end, use_time, link,
         class_first, object_class, headroom, use_headroom, ahead_gap, lru, threshold_s,
         resident_tensor, resident_obj, n_instr_max, n_deps_max, n_objs_max, kept_ahead, newest_for_outputs,
         width, slot_ptr, chunk_class, resident_chunk_ptr, resident_chunks, n_pl_max, n_pl_chunks_max):
    n_t = nbytes.shape[0]
    # Tensors kept to the end (next values, the loss) have the end as next use. Belady's keys
    # treat that as "never leaves ahead" unless kept_ahead: then key_end lies past every
    # next-use slot (steps, the end, never, next iteration's first reads), nothing matches it,
    # and they leave ahead like any tensor used at the end's time.
    key_end = schedule.shape[0] + (state_cur.shape[0] + 3 if kept_ahead else 0)
    n_obj = object_class.shape[0]
    n_cls = class_first.shape[0] - 1
    end = schedule.shape[0]
    # ---- state
    tenant = np.full(n_obj, -1, dtype=np.int64)
    obj_of = np.full(n_t, -1, dtype=np.int64)
    # A tensor of the chunk class sits in width[t] chunks (its objects, any of the class), held
    # in held[slot_ptr[t]:slot_ptr[t] + width[t]], and the Program names it by a placement: the
    # object n_obj + j, a virtual range mapped onto those chunks (pl_chunks[pl_ptr[j]:...]).
    # A tensor of any other class sits in the one object obj_of[t] (_span treats both alike).
    held = np.full(slot_ptr[n_t], -1, dtype=np.int64)
    pl_ptr = np.zeros(n_pl_max + 1, dtype=np.int64)
    pl_chunks = np.empty(n_pl_chunks_max, dtype=np.int64)
    n_pl = np.zeros(1, dtype=np.int64)
    # A chunked tensor's Belady key sits in the max-tree at its lowest chunk only (the others
    # hold -inf): one update per event instead of one per chunk, and the tree's ties (the lower
    # object) fall as they would with the key on every chunk.
    key_chunk = np.full(n_t, -1, dtype=np.int64)
    places = (held, slot_ptr, width, klass, chunk_class, pl_ptr, pl_chunks, n_pl, n_obj, key_chunk)
    release = np.full((n_obj, 3), -1, dtype=np.int64)
    writer = np.full(n_t, -1, dtype=np.int64)
    host_writer = np.full(n_t, NOT_HOST, dtype=np.int64)
    pinned = kept & host_at_start       # state nothing updates: never evicted ahead
    read_no = np.zeros(n_t, dtype=np.int64)        # reads done so far
    next_read = np.empty(n_t, dtype=np.int64)
    busy = np.zeros(n_t, dtype=np.bool_)
    last_touch = np.full(n_t, -1, dtype=np.int64)
    # When each object's tenant is next used (use_time of its next read), kept current while
    # the object is occupied (stale once vacated: readers check tenant first): Belady's key.
    next_use_at = np.zeros(n_obj)
    # Per class, a max-tree over its objects of next_use_at (-inf when empty or holding a tensor
    # kept to the end): the furthest tenant in O(1), which evicting ahead asks after every
    # operator. Built only when evicting ahead.
    tree_size = np.ones(n_cls, dtype=np.int64)
    for k in range(n_cls):
        while tree_size[k] < class_first[k + 1] - class_first[k]:
            tree_size[k] *= 2
    tree_base = np.zeros(n_cls, dtype=np.int64)
    for k in range(1, n_cls):
        tree_base[k] = tree_base[k - 1] + 2 * tree_size[k - 1]
    n_tree = tree_base[n_cls - 1] + 2 * tree_size[n_cls - 1] if n_cls > 0 and use_headroom else 0
    tree_val = np.full(n_tree, -np.inf)
    tree_obj = np.full(n_tree, -1, dtype=np.int64)
    tree = (tree_val, tree_obj, tree_base, tree_size, object_class, class_first)
    for k in range(n_cls if n_tree else 0):
        for o in range(class_first[k], class_first[k + 1]):
            tree_obj[tree_base[k] + tree_size[k] + o - class_first[k]] = o
        for i in range(tree_size[k] - 1, 0, -1):
            tree_obj[tree_base[k] + i] = tree_obj[tree_base[k] + 2 * i]
    for t in range(n_t):
        r0, r1 = read_ptr0[t], read_ptr0[t + 1]
        next_read[t] = reads[r0] if r1 > r0 else after_reads[t]
    home_of = np.full(n_t, -1, dtype=np.int64)      # resident state's object at the start
    taken = np.zeros(n_obj, dtype=np.bool_)
    for r in range(resident_tensor.shape[0]):
        t, o = resident_tensor[r], resident_obj[r]
        if klass[t] == chunk_class:        # back in the chunks where its next value ended
            for j in range(resident_chunk_ptr[r + 1] - resident_chunk_ptr[r]):
                held[slot_ptr[t] + j] = resident_chunks[resident_chunk_ptr[r] + j]
            o = _new_placement(t, places)
        arr, a, b = _settle(t, o, tenant, obj_of, places, next_use_at, use_time[next_read[t]],
                            _tree_key(t, next_read, use_time, key_end, pinned), tree)
        for j in range(a, b):
            taken[arr[j]] = True
        home_of[t] = o
    for t in range(n_t):
        if host_at_start[t] and home_of[t] < 0:
            host_writer[t] = -1
    for q in range(state_cur.shape[0]):
        if state_cur[q] == state_nxt[q]:    # state nothing updates: its host copy stays current
            host_writer[state_cur[q]] = -1
    # Free objects of each class, a FIFO ring per class (the earliest freed first).
    ring = np.empty(n_obj, dtype=np.int64)
    head = np.zeros(n_cls, dtype=np.int64)
    size = np.zeros(n_cls, dtype=np.int64)
    for k in range(n_cls):
        for o in range(class_first[k], class_first[k + 1]):
            if not taken[o]:
                ring[class_first[k] + size[k]] = o
                size[k] += 1
    # ---- output
    kind = np.empty(n_instr_max, dtype=np.int8)
    target = np.empty(n_instr_max, dtype=np.int64)
    obj = np.empty(n_instr_max, dtype=np.int64)
    copy = np.empty(n_instr_max, dtype=np.bool_)
    dep_ptr = np.zeros(n_instr_max + 1, dtype=np.int64)
    deps = np.empty(n_deps_max, dtype=np.int64)
    obj_count = np.zeros(n_instr_max, dtype=np.int64)   # a compute's objects; 0 for copies
    seen = np.full(n_instr_max, -1, dtype=np.int64)     # seen[x] == n: x is already a candidate of n
    objects = np.empty(n_objs_max, dtype=np.int64)
    n_objects = 0
    n = 0
    out = (kind, target, obj, copy, dep_ptr, deps)
    # Objects an eviction freed whose copy out is still to finish ("dirty") wait in a second
    # ring: a compute's output takes one only when no object a compute freed is left.
    ring2 = np.empty(n_obj, dtype=np.int64)
    head2 = np.zeros(n_cls, dtype=np.int64)
    size2 = np.zeros(n_cls, dtype=np.int64)
    freed_at = np.zeros(n_obj, dtype=np.int64)      # order in which objects were freed (0: at the start)
    clock = np.ones(1, dtype=np.int64)
    one = np.empty(1, dtype=np.int64)       # a single object for _pop_free and _push_free
    pool = (ring, head, size, class_first, tenant, obj_of, ring2, head2, size2, freed_at, clock, newest_for_outputs,
            one)
    cand = np.empty(64, dtype=np.int64)
    err = np.zeros(3, dtype=np.int64)      # code, step, class
    no_strays = np.zeros(0, dtype=np.bool_)
    in_objs = np.empty(64, dtype=np.int64)
    out_objs = np.empty(64, dtype=np.int64)
    dying = np.empty(64, dtype=np.int64)
    classes = np.empty(n_cls, dtype=np.int64)            # the classes an operator touches
    class_seen_at = np.full(n_cls, -1, dtype=np.int64)

    for pos in range(end):
        nid = schedule[pos]
        i0, i1 = in_ptr[nid], in_ptr[nid + 1]
        u0, u1 = uniq_ptr[nid], uniq_ptr[nid + 1]
        o0, o1 = out_ptr[nid], out_ptr[nid + 1]
        n_in, n_out = i1 - i0, o1 - o0
        need = n_in + 3 * n_out + 4
        if chunk_class >= 0:        # a chunked tensor's copy or compute waits on each of its chunks
            for e in range(o0, o1):
                need += 3 * (width[outs[e]] - 1)
            for e in range(u0, u1):
                need = max(need, 3 * width[uniq_in[e]] + 1)
        if need > cand.shape[0]:
            cand = np.empty(2 * need, dtype=np.int64)
        if n_in > in_objs.shape[0] or n_out > out_objs.shape[0]:
            in_objs = np.empty(2 * n_in + 2, dtype=np.int64)
            out_objs = np.empty(2 * n_out + 2, dtype=np.int64)
            dying = np.empty(2 * n_in + 2, dtype=np.int64)
        for e in range(i0, i1):
            busy[ins[e]] = True
        for e in range(o0, o1):
            busy[outs[e]] = True
        # -- inputs not resident come in
        for e in range(u0, u1):
            t = uniq_in[e]
            if obj_of[t] < 0:
                if host_writer[t] == NOT_HOST:
                    err[0], err[1], err[2] = NOT_ON_HOST, pos, t
                    return (n, kind, target, obj, copy, dep_ptr, deps, obj_count, objects, obj_of, no_strays, err,
                            held, pl_ptr, pl_chunks, 0)
                o, n = _acquire(t, pos, klass, pool, busy, last_touch, step_end, next_use_at, nbytes, link, lru,
                                threshold_s, host_writer, writer, release, out, n, cand, err, tree, False, places)
                if o < 0:
                    return (n, kind, target, obj, copy, dep_ptr, deps, obj_count, objects, obj_of, no_strays, err,
                            held, pl_ptr, pl_chunks, 0)
                arr, a, b = _settle(t, o, tenant, obj_of, places, next_use_at, use_time[next_read[t]],
                                    _tree_key(t, next_read, use_time, key_end, pinned), tree)
                cand[0] = host_writer[t]
                c = 1
                for j in range(a, b):
                    c = _releases(cand, c, release, arr[j], seen, n)
                n = _emit(out, n, SWAP_IN, t, o, True, cand, c)
                for j in range(a, b):
                    release[arr[j], 0], release[arr[j], 1], release[arr[j], 2] = -1, n - 1, -1
                writer[t] = n - 1
        for e in range(i0, i1):
            in_objs[e - i0] = obj_of[ins[e]]
        # -- inputs read for the last time here (in input order; freed in reverse below)
        n_dying = 0
        for e in range(u0, u1):
            t = uniq_in[e]
            if read_no[t] + 1 >= read_ptr0[t + 1] - read_ptr0[t] and not kept[t]:
                dying[n_dying] = t
                n_dying += 1
        # -- outputs: in place over a dying input, or an object of their class
        for k in range(n_out):
            t = outs[o0 + k]
            src = -1
            if declares_inplace[nid]:
                j = out_inplace[o0 + k]
                if j >= 0:
                    x = ins[i0 + j]
                    times = 0
                    for e in range(i0, i1):
                        if ins[e] == x:
                            times += 1
                    at = -1
                    for d in range(n_dying):
                        if dying[d] == x:
                            at = d
                    if (times == 1 and at >= 0 and width[x] == width[t]
                            and (klass[x] == chunk_class) == (klass[t] == chunk_class)):
                        src = j
                        for d in range(at, n_dying - 1):
                            dying[d] = dying[d + 1]
                        n_dying -= 1
            if src >= 0:
                x = ins[i0 + src]
                o = in_objs[src]
                arr, a, b = _span(x, obj_of, places)
                for j in range(a, b):
                    tenant[arr[j]] = -1
                _tree_set(_key_object(x, obj_of, places), -np.inf, tree)
                for j in range(width[t] if klass[t] == chunk_class else 0):   # its chunks and placement
                    held[slot_ptr[t] + j] = held[slot_ptr[x] + j]
                obj_of[x] = -1
                out_objs[k] = o
            else:
                o, n = _acquire(t, pos, klass, pool, busy, last_touch, step_end, next_use_at, nbytes, link, lru,
                                threshold_s, host_writer, writer, release, out, n, cand, err, tree, True, places)
                if o < 0:
                    return (n, kind, target, obj, copy, dep_ptr, deps, obj_count, objects, obj_of, no_strays, err,
                            held, pl_ptr, pl_chunks, 0)
                out_objs[k] = o
        # -- the compute
        c = 0
        for e in range(i0, i1):
            cand[c] = writer[ins[e]]
            c += 1
        for k in range(n_out):
            t = outs[o0 + k]
            a, b = (slot_ptr[t], slot_ptr[t] + width[t]) if klass[t] == chunk_class else (0, 1)
            for j in range(a, b):
                o = held[j] if klass[t] == chunk_class else out_objs[k]
                c = _releases(cand, c, release, o, seen, n)
        n = _emit(out, n, COMPUTE, nid, -1, True, cand, c)
        i = n - 1
        obj_count[i] = n_in + n_out
        for e in range(n_in):
            objects[n_objects] = in_objs[e]
            n_objects += 1
        for k in range(n_out):
            objects[n_objects] = out_objs[k]
            n_objects += 1
        for e in range(u0, u1):
            t = uniq_in[e]
            read_no[t] += 1
            r = read_ptr0[t] + read_no[t]
            next_read[t] = reads[r] if r < read_ptr0[t + 1] else after_reads[t]
            last_touch[t] = pos
            if obj_of[t] >= 0:
                arr, a, b = _span(t, obj_of, places)
                for j in range(a, b):
                    release[arr[j], COMPUTE] = i
                    next_use_at[arr[j]] = use_time[next_read[t]]
                _tree_set(_key_object(t, obj_of, places), _tree_key(t, next_read, use_time, key_end, pinned), tree)
        for k in range(n_out):
            t = outs[o0 + k]
            arr, a, b = _settle(t, out_objs[k], tenant, obj_of, places, next_use_at, use_time[next_read[t]],
                                _tree_key(t, next_read, use_time, key_end, pinned), tree)
            for j in range(a, b):
                release[arr[j], 0], release[arr[j], 1], release[arr[j], 2] = i, -1, -1
            writer[t] = i
            last_touch[t] = pos
        for d in range(n_dying - 1, -1, -1):
            t = dying[d]
            if not stays[t]:
                _free(t, pool, tree, places)
        for k in range(n_out):
            t = outs[o0 + k]
            if read_ptr0[t + 1] == read_ptr0[t] and not kept[t]:
                _free(t, pool, tree, places)
        for e in range(i0, i1):
            busy[ins[e]] = False
        for e in range(o0, o1):
            busy[outs[e]] = False
        if use_headroom:
            # -- evict ahead of need in each class this operator touched, ascending
            n_cls_here = 0
            for e in range(i0, i1 + o1 - o0):
                t = ins[e] if e < i1 else outs[o0 + e - i1]
                kt = klass[t]
                if class_seen_at[kt] != pos:
                    class_seen_at[kt] = pos
                    classes[n_cls_here] = kt
                    n_cls_here += 1
            classes[:n_cls_here].sort()
            now = step_end[pos]
            for q in range(n_cls_here):
                kq = classes[q]
                # Most steps stop here: the class has its headroom, or its furthest tenant (the
                # root of its max-tree; those kept to the end aside) comes back too soon to leave.
                root = tree_base[kq] + 1
                if headroom[kq] <= size[kq] + size2[kq] or tree_val[root] == -np.inf:
                    continue
                first = tenant[tree_obj[root]]
                r = next_read[first]
                if r < end and _too_soon(first, r, pos, now, use_time, nbytes, link, ahead_gap):
                    continue
                n = _evict_ahead(pos, kq, headroom, pool, next_read, next_use_at, use_time, step_end, nbytes, link,
                                 ahead_gap, key_end, host_writer, writer, release, out, n, cand, tree, pinned, places)
    # ---- state leaving: a next value not back in its home object is written to the host;
    # resident state whose next value strayed is reported
    strayed = np.zeros(state_cur.shape[0], dtype=np.bool_)
    for q in range(state_cur.shape[0]):
        cur, nxt = state_cur[q], state_nxt[q]
        home = home_of[cur]
        if home >= 0 and obj_of[nxt] == home:
            continue
        if home >= 0:
            strayed[q] = True
        if host_writer[nxt] == NOT_HOST:
            cand[0] = writer[nxt]
            n = _emit(out, n, SWAP_OUT, nxt, obj_of[nxt], True, cand, 1)
            host_writer[nxt] = n - 1
    obj_ptr = np.zeros(n + 1, dtype=np.int64)
    obj_ptr[1:] = np.cumsum(obj_count[:n])
    return (n, kind, target, obj, copy, dep_ptr, deps, obj_ptr, objects, obj_of, strayed, err,
            held, pl_ptr, pl_chunks, n_pl[0])


@numba.njit(cache=True, inline="always")
def _span(t, obj_of, places):
    """The objects resident tensor t sits in, as (array, first, end): its chunks for the chunk
    class, else its one object (``obj_of[t]``)."""
    held, slot_ptr, width, klass, chunk_class = places[0], places[1], places[2], places[3], places[4]
    if klass[t] == chunk_class:
        return held, slot_ptr[t], slot_ptr[t] + width[t]
    return obj_of, t, t + 1


@numba.njit(cache=True, inline="always")
def _settle(t, o, tenant, obj_of, places, next_use_at, next_use, key, tree):
    """Make t the tenant of object o (for the chunk class: placement o, on the chunks it holds),
    with its next use and Belady key; the span of its objects (``_span``)."""
    obj_of[t] = o
    arr, a, b = _span(t, obj_of, places)
    lowest = arr[a]
    for j in range(a, b):
        tenant[arr[j]] = t
        next_use_at[arr[j]] = next_use
        lowest = min(lowest, arr[j])
    places[9][t] = lowest
    _tree_set(lowest, key, tree)
    return arr, a, b


@numba.njit(cache=True, inline="always")
def _key_object(t, obj_of, places):
    """The object that holds resident t's key in its class's max-tree: its object, or for the
    chunk class its lowest chunk (set by ``_settle``)."""
    return places[9][t] if places[3][t] == places[4] else obj_of[t]


@numba.njit(cache=True, inline="always")
def _new_placement(t, places):
    """Record t's chunks (held) as a new placement; its object id (past the layout's objects)."""
    held, slot_ptr, width, pl_ptr, pl_chunks, n_pl, n_obj = (places[0], places[1], places[2], places[5],
                                                              places[6], places[7], places[8])
    j = n_pl[0]
    base = pl_ptr[j]
    for i in range(width[t]):
        pl_chunks[base + i] = held[slot_ptr[t] + i]
    pl_ptr[j + 1] = base + width[t]
    n_pl[0] = j + 1
    return n_obj + j


@numba.njit(cache=True, inline="always")
def _free(t, pool, tree, places):
    """Give back the objects of t, which dies (clean: nothing to copy out)."""
    tenant, obj_of = pool[4], pool[5]
    _tree_set(_key_object(t, obj_of, places), -np.inf, tree)
    arr, a, b = _span(t, obj_of, places)
    _push_free_from(arr, a, b, tree[4][arr[a]], False, pool)
    for j in range(a, b):
        tenant[arr[j]] = -1
    obj_of[t] = -1


@numba.njit(cache=True, inline="always")
def _evict(victim, pool, host_writer, writer, release, out, n, cand, tree, places):
    """Take victim off the device, copying it out if its host copy is stale; (object, n). Its
    objects are not put back on a free ring (``_push_objects``)."""
    obj_of, tenant = pool[5], pool[4]
    o = obj_of[victim]
    arr, a, b = _span(victim, obj_of, places)
    if host_writer[victim] == NOT_HOST:
        cand[0] = writer[victim]
        n = _emit(out, n, SWAP_OUT, victim, o, True, cand, 1)
        host_writer[victim] = n - 1
        for j in range(a, b):
            release[arr[j], SWAP_OUT] = n - 1
    for j in range(a, b):
        tenant[arr[j]] = -1
    _tree_set(_key_object(victim, obj_of, places), -np.inf, tree)
    obj_of[victim] = -1
    return o, n


@numba.njit(cache=True, inline="always")
def _push_objects(t, o, k, dirty, pool, places):
    """Put the objects evicted tensor t sat in (its chunks, or o) on class k's free ring; how many."""
    held, slot_ptr, width, klass, chunk_class = places[0], places[1], places[2], places[3], places[4]
    if klass[t] != chunk_class:
        _push_free(o, k, dirty, pool)
        return 1
    _push_free_from(held, slot_ptr[t], slot_ptr[t] + width[t], k, dirty, pool)
    return width[t]


@numba.njit(cache=True, inline="always")
def _take_chunks(t, pos, for_output, pool, busy, last_touch, step_end, next_use_at, nbytes, link, lru, threshold_s,
                 host_writer, writer, release, out, n, cand, err, tree, places):
    """width[t] free chunks for t (into held), evicting residents of the chunk class (Belady, as
    ``_acquire``) until enough are free; n, with err set when every resident is busy."""
    held, slot_ptr, width, chunk_class = places[0], places[1], places[2], places[4]
    base, w = slot_ptr[t], width[t]
    got = 0
    while True:
        got += _pop_free_into(chunk_class, pool, for_output, held, base + got, w - got)
        if got == w:
            return n
        victim = _victim(t, chunk_class, pos, pool, busy, last_touch, step_end, next_use_at, nbytes, link, lru,
                         threshold_s)
        if victim < 0:
            err[0], err[1], err[2] = NEEDS_MORE_OBJECTS, pos, chunk_class
            return n
        n_before = n
        o, n = _evict(victim, pool, host_writer, writer, release, out, n, cand, tree, places)
        _push_objects(victim, o, chunk_class, n > n_before, pool, places)


@numba.njit(cache=True, inline="always")
def _acquire(t, pos, klass, pool, busy, last_touch, step_end, next_use_at, nbytes, link, lru, threshold_s,
             host_writer, writer, release, out, n, cand, err, tree, for_output, places):
    """A free object of t's class (``_pop_free``), evicting a resident tensor if none is free;
    (object, n), object -1 with err set when every object of the class is busy. For the chunk
    class, the placement of the chunks it takes (``_take_chunks``)."""
    k = klass[t]
    if k == places[4]:
        n = _take_chunks(t, pos, for_output, pool, busy, last_touch, step_end, next_use_at, nbytes, link, lru,
                         threshold_s, host_writer, writer, release, out, n, cand, err, tree, places)
        return (-1 if err[0] != OK else _new_placement(t, places)), n
    o = _pop_free(k, pool, for_output)
    if o >= 0:
        return o, n
    best = _victim(t, k, pos, pool, busy, last_touch, step_end, next_use_at, nbytes, link, lru, threshold_s)
    if best < 0:
        err[0], err[1], err[2] = NEEDS_MORE_OBJECTS, pos, k
        return -1, n
    return _evict(best, pool, host_writer, writer, release, out, n, cand, tree, places)


@numba.njit(cache=True, inline="always")
def _victim(t, k, pos, pool, busy, last_touch, step_end, next_use_at, nbytes, link, lru, threshold_s):
    """The resident tensor of class k to evict to make room for t, or -1 when every one is busy:
    Belady among those idle for at least the threshold (LRU for on-demand swapping); ties go to
    the lowest tensor id."""
    class_first, tenant = pool[3], pool[4]
    lo, hi = class_first[k], class_first[k + 1]
    now = step_end[pos - 1] if pos > 0 else 0.0
    if lru:
        best, best_touch = -1, 0
        for o in range(lo, hi):
            x = tenant[o]
            if x >= 0 and not busy[x]:
                if best < 0 or last_touch[x] < best_touch or (last_touch[x] == best_touch and x < best):
                    best, best_touch = x, last_touch[x]
    else:
        threshold = threshold_s
        if threshold < 0:
            threshold = nbytes[t] / link if link > 0 else 0.0
        any_idle = False
        for o in range(lo, hi):
            x = tenant[o]
            if x >= 0 and not busy[x]:
                tx = last_touch[x]
                if tx < 0 or now - step_end[max(tx, 0)] >= threshold:
                    any_idle = True
                    break
        best, best_far = -1, -np.inf
        for o in range(lo, hi):
            far = next_use_at[o] - now
            if far < best_far:           # the common case: no better than the best so far
                continue
            x = tenant[o]
            if x < 0 or busy[x]:
                continue
            if any_idle:
                tx = last_touch[x]
                if not (tx < 0 or now - step_end[max(tx, 0)] >= threshold):
                    continue
            if best < 0 or far > best_far or x < best:
                best, best_far = x, far
    return best


@numba.njit(cache=True, inline="always")
def _evict_ahead(pos, k, headroom, pool, next_read, next_use_at, use_time, step_end, nbytes, link, ahead_gap, end,
                 host_writer, writer, release, out, n, cand, tree, pinned, places):
    """Keep class k's headroom free: of the ``want`` tenants used furthest ahead (ties: object
    order), evict those whose next use leaves time to swap them out and back, stopping at the
    first that comes back too soon. Tenants kept to the end (a state's next value, the loss)
    never leave here but take their place in that order: after those never used again, before
    the rest; the class's max-tree holds the others in order. ``end`` is the scan's
    ``key_end``: with kept_ahead no tenant's next use equals it, and those kept to the end are
    in the tree like the rest."""
    class_first, tenant = pool[3], pool[4]
    tree_val, tree_obj, tree_base = tree[0], tree[1], tree[2]
    want = headroom[k] - pool[2][k] - pool[8][k]
    lo, hi = class_first[k], class_first[k + 1]
    now = step_end[pos]
    root = tree_base[k] + 1
    kept_counted = False
    while want > 0 and tree_val[root] != -np.inf:
        if tree_val[root] != np.inf and not kept_counted:
            kept_counted = True
            for o in range(lo, hi):
                if tenant[o] >= 0 and (next_read[tenant[o]] == end or pinned[tenant[o]]):
                    want -= 1
            if want <= 0:
                break
        t = tenant[tree_obj[root]]
        r = next_read[t]
        if r < end and _too_soon(t, r, pos, now, use_time, nbytes, link, ahead_gap):
            break
        n_before = n
        o, n = _evict(t, pool, host_writer, writer, release, out, n, cand, tree, places)
        want -= _push_objects(t, o, k, n > n_before, pool, places)      # dirty when a copy out was emitted
    return n


@numba.njit(cache=True, inline="always")
def _too_soon(t, r, pos, now, use_time, nbytes, link, ahead_gap):
    """Whether t, next read at step r, comes back too soon to be evicted ahead of need: its
    swap-out and swap-in back would not both fit before r (without a link: r is the next step)."""
    travel = nbytes[t] / link if link > 0 else 0.0
    return use_time[r] - now < ahead_gap * travel or (link <= 0 and r - pos < 2)


@numba.njit(cache=True, inline="always")
def _tree_set(o, value, tree):
    """Set object o's Belady key in its class's max-tree (ties: the lower object)."""
    tree_val, tree_obj, tree_base, tree_size, object_class, class_first = tree
    if tree_val.shape[0] == 0:        # no tree: not evicting ahead
        return
    k = object_class[o]
    i = tree_size[k] + o - class_first[k]
    base = tree_base[k]
    tree_val[base + i] = value
    i //= 2
    while i >= 1:
        a, b = base + 2 * i, base + 2 * i + 1
        c = b if tree_val[b] > tree_val[a] else a
        if tree_val[base + i] == tree_val[c] and tree_obj[base + i] == tree_obj[c]:
            break                       # nothing above changes
        tree_val[base + i], tree_obj[base + i] = tree_val[c], tree_obj[c]
        i //= 2


@numba.njit(cache=True, inline="always")
def _push_free(o, k, dirty, pool):
    """Put object o of class k at the back of its class's free ring (``_push_free_from``)."""
    one = pool[12]
    one[0] = o
    _push_free_from(one, 0, 1, k, dirty, pool)


@numba.njit(cache=True, inline="always")
def _push_free_from(src, a, b, k, dirty, pool):
    """Put objects src[a:b] of class k, in turn, at the back of its class's free ring: the dirty
    one when the copy out of their last tenant is still to finish, else the clean one. (One
    call for a chunked tensor's chunks: numba counts references to the pool's arrays each
    time a helper unpacks them, which per chunk cost more than the work.)"""
    class_first, freed_at, clock = pool[3], pool[9], pool[10]
    ring, head, size = (pool[6], pool[7], pool[8]) if dirty else (pool[0], pool[1], pool[2])
    lo = class_first[k]
    cap = class_first[k + 1] - lo
    for j in range(a, b):
        o = src[j]
        ring[lo + (head[k] + size[k]) % cap] = o
        size[k] += 1
        freed_at[o] = clock[0]
        clock[0] += 1


@numba.njit(cache=True, inline="always")
def _pop_free(k, pool, for_output):
    """A free object of class k, or -1 (``_pop_free_into``)."""
    one = pool[12]
    return one[0] if _pop_free_into(k, pool, for_output, one, 0, 1) else -1


@numba.njit(cache=True, inline="always")
def _pop_free_into(k, pool, for_output, dest, at, count):
    """Up to ``count`` free objects of class k into dest[at:], one after another; how many
    (fewer when the class runs out). For a swap-in, the one freed earliest (the copy into it
    can start soonest). For a compute's output (with ``newest_for_outputs``), the one a compute
    freed last: its release lies earlier on the compute stream, so the output waits for
    nothing, and the objects freed long ago stay free for swap-ins to start early; a dirty one
    (its copy out still running) only when no clean one is left."""
    ring, head, size, class_first = pool[0], pool[1], pool[2], pool[3]
    ring2, head2, size2, freed_at, newest = pool[6], pool[7], pool[8], pool[9], pool[11]
    lo = class_first[k]
    cap = class_first[k + 1] - lo
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
def _tree_key(t, next_read, use_time, end, pinned):
    """A resident tensor's key in its class's max-tree: when it is next used; -inf (out of the
    tree) for a tensor kept to the end, which is never evicted ahead, and for state nothing
    updates (``pinned``: evicting it ahead only brings it back, this iteration or the next)."""
    return -np.inf if next_read[t] == end or pinned[t] else use_time[next_read[t]]
