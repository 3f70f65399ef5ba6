"""planner/swap_scan.py: the compiled pass, on small hand-made graphs whose plan can be read off.

Every tensor is 1 KiB (256 float32) unless said otherwise; no profile, so the recency
threshold is zero and the pass evicts by next use (Belady) or last use (LRU) alone."""
import inspect

import numpy as np
import pytest

from allocator import Allocation, SizeClassLayout
from engine.ir import Graph
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT
from planner import swap_scan
from planner.errors import PlanError
from planner.facts import GraphFacts
from planner.swap_planner import GraphArrays, PlanOptions, _scan, _Schedule, plan, plan_arrays
from planner.verify import verify

KIB = 1024


def one_class(count: int, size: int = KIB) -> Allocation:
    return Allocation(np.array([size]), np.array([0]), np.array([count]))


def names(g, arrays):
    """The emitted instructions as (kind, tensor or node name)."""
    out = []
    for kind, target in zip(arrays.kind.tolist(), arrays.target.tolist()):
        out.append((kind, g.nodes[target].name if kind == COMPUTE else g.tensors[target].name))
    return out


def test_scan_takes_its_inputs_as_a_handful_of_named_records():
    params = inspect.signature(swap_scan.scan.py_func).parameters
    assert list(params) == ["graph", "order", "layout", "rules", "residents", "capacity"]


@pytest.mark.parametrize("key,t,best_key,best,first", [
    (1.0, 5, 0.0, 3, True),      # the larger key leaves first
    (0.0, 5, 1.0, 3, False),
    (1.0, 2, 1.0, 3, True),      # ties: the lower tensor id
    (1.0, 4, 1.0, 3, False),
    (-np.inf, 9, 0.0, -1, True),  # none chosen yet
])
def test_the_eviction_rule(key, t, best_key, best, first):
    assert swap_scan.evicts_first(key, t, best_key, best) == first


def tie_graph():
    """a and b come from one split and are next read by one node: a tie for both rules."""
    g = Graph("tie")
    x = g.input("x", (512,))                       # 2 KiB
    a, b = g.apply("split", [x], axis=0, sizes=[256, 256], name="split")
    g.apply("relu", [x], name="y")                 # needs an object while x, a, b are resident
    (z,) = g.apply("add", [a, b], name="z")
    g.set_loss(z)
    return g


@pytest.mark.parametrize("victim", ["belady", "lru"])
def test_ties_evict_the_lowest_tensor_id(victim):
    g = tie_graph()
    alloc = Allocation(np.array([KIB, 2 * KIB]), np.array([0, 0]), np.array([3]))
    arrays, *_ = plan_arrays(g, g.default_order(), alloc, options=PlanOptions(victim=victim))
    steps = names(g, arrays)
    first_out = next(name for kind, name in steps if kind == SWAP_OUT)
    assert first_out == "split:0"
    p = plan(g, g.default_order(), alloc, 0, options=PlanOptions(victim=victim))
    verify(p, g)


def update_graph(kept_input: bool):
    """u = accumulate(w, tanh(x)), u the next value of w; with ``kept_input``, an accumulate
    over t = tanh(x) read back after the iteration instead, which it may not overwrite."""
    g = Graph("update")
    x = g.input("x", (256,))
    w = g.parameter("w", (256,))
    (t,) = g.apply("tanh", [x], name="t")
    if kept_input:
        (u,) = g.apply("accumulate", [t, w], name="u")
        g.mark_output(t)
        g.set_loss(u)
    else:
        (u,) = g.apply("accumulate", [w, t], name="u")
        g.state_pairs = [(w, u)]
    return g, u


def test_an_update_over_a_dying_input_takes_its_object():
    g, u = update_graph(kept_input=False)
    p = plan(g, g.default_order(), one_class(2), 0)
    verify(p, g)
    update = next(i for i in p.instrs if i.kind == COMPUTE and g.nodes[i.target].name == "u")
    w_obj, t_obj, u_obj = update.objects
    assert u_obj == w_obj != t_obj
    assert GraphFacts(g).demand.minimum.tolist() == [2]


def test_an_input_kept_past_the_iteration_is_not_overwritten_and_the_facts_count_it():
    g, _ = update_graph(kept_input=True)
    assert GraphFacts(g).demand.minimum.tolist() == [3]
    with pytest.raises(PlanError, match=r"operator 'u' \(accumulate\) needs 3 objects of size class 0 at once; "
                                        r"the allocation has 2"):
        plan(g, g.default_order(), one_class(2), 0)
    verify(plan(g, g.default_order(), one_class(3), 0), g)


def chunk_graph():
    """8 KiB tensors on 4 KiB chunks (two each): a is evicted for b, then brought back."""
    g = Graph("chunks")
    x = g.input("x", (2048,))
    (a,) = g.apply("relu", [x], name="a")
    (b,) = g.apply("tanh", [x], name="b")
    (c,) = g.apply("accumulate", [a, b], name="c")      # in place over a, on a's chunks
    g.set_loss(c)
    return g


def test_a_chunked_tensor_is_evicted_and_brought_back_on_any_chunks():
    g = chunk_graph()
    alloc = Allocation(np.array([8 * KIB]), np.array([0]), np.array([5]), chunk_bytes=4 * KIB)
    arrays, layout, _, placements = plan_arrays(g, g.default_order(), alloc)
    assert names(g, arrays) == [(SWAP_IN, "x"), (COMPUTE, "a"), (SWAP_OUT, "a"), (COMPUTE, "b"),
                                (SWAP_IN, "a"), (COMPUTE, "c")]
    assert placements is not None and layout.num_objects == 5
    p = plan(g, g.default_order(), alloc, 0)
    verify(p, g)
    c = next(i for i in p.instrs if i.kind == COMPUTE and g.nodes[i.target].name == "c")
    a_back = next(i for i in p.instrs if i.kind == SWAP_IN and g.tensors[i.target].name == "a")
    assert c.objects[0] == a_back.obj == c.objects[-1]      # c over a's placement, in place


def test_too_few_objects_is_one_line_naming_the_operator():
    g = tie_graph()
    with pytest.raises(PlanError, match=r"operator 'split' \(split\) needs 3 objects of size class 0 at once; "
                                        r"the allocation has 2"):
        plan(g, g.default_order(), Allocation(np.array([KIB, 2 * KIB]), np.array([0, 0]), np.array([2])), 0)


@pytest.mark.parametrize("buffer", swap_scan.CAPACITY_NAMES[:3])
def test_a_full_buffer_is_an_internal_error_naming_it(buffer):
    g = tie_graph()
    ga = GraphArrays.of(g)
    alloc = Allocation(np.array([KIB, 2 * KIB]), np.array([0, 0]), np.array([3]))
    layout = SizeClassLayout.from_allocation(alloc)
    sc = _Schedule(g, ga, g.default_order(), layout, None, None, PlanOptions())
    sc.capacity = sc.capacity._replace(**{buffer: 2})
    with pytest.raises(RuntimeError, match=f"planner bug: the swap pass's {buffer} buffer \\(capacity 2\\) is full"):
        _scan(g, ga, sc, layout, {})


@pytest.mark.parametrize("buffer", swap_scan.CAPACITY_NAMES[3:])
def test_a_full_placement_buffer_is_an_internal_error_naming_it(buffer):
    g = chunk_graph()
    ga = GraphArrays.of(g)
    alloc = Allocation(np.array([8 * KIB]), np.array([0]), np.array([5]), chunk_bytes=4 * KIB)
    layout = SizeClassLayout.from_allocation(alloc)
    sc = _Schedule(g, ga, g.default_order(), layout, None, None, PlanOptions())
    sc.capacity = sc.capacity._replace(**{buffer: 1})
    with pytest.raises(RuntimeError, match=f"planner bug: the swap pass's {buffer} buffer \\(capacity 1\\) is full"):
        _scan(g, ga, sc, layout, {})
