
from engine.ir import Graph
from engine.liveness import lifetimes, live_bytes_per_step, peak_bytes


def chain():
    g = Graph()
    x = g.input("x", (256,))                 # 1 KiB
    (a,) = g.apply("relu", [x], name="a")
    (b,) = g.apply("tanh", [a], name="b")
    (c,) = g.apply("add", [a, b], name="c")
    (d,) = g.apply("relu", [c], name="d")
    return g, (x, a, b, c, d)


def test_lifetimes_follow_the_schedule():
    g, (x, a, b, c, d) = chain()
    lt = lifetimes(g, [0, 1, 2, 3])
    assert lt.start.tolist() == [0, 0, 1, 2, 3]
    assert lt.end.tolist() == [0, 2, 2, 3, 3]


def test_live_bytes_match_a_brute_force_count():
    g, ts = chain()
    order = [0, 1, 2, 3]
    lt = lifetimes(g, order)
    brute = [sum(g.tensors[t].nbytes for t in ts if lt.start[t] <= p <= lt.end[t]) for p in range(4)]
    assert live_bytes_per_step(g, order).tolist() == brute == [2048, 2048, 3072, 2048]
    assert peak_bytes(g, order) == 3072


def test_updated_state_reuses_its_storage_when_its_old_value_dies():
    g = Graph()
    w = g.parameter("w", (256,))
    gr = g.input("grad", (256,))
    m = g.state("m", (256,))
    g.apply("relu", [w], name="use")
    g.apply("sgd_update", [w, gr, m], name="upd", lr=0.1)
    lt = lifetimes(g, [0, 1])
    w_next, m_next = g.nodes[1].outputs
    assert lt.inplace_of[w_next] == w and lt.inplace_of[m_next] == m
    # w, grad, m, relu's output: the update's outputs reuse w's and m's storage
    assert peak_bytes(g, [0, 1]) == 4 * 1024


def test_a_chain_of_in_place_accumulations_is_one_allocation():
    g = Graph(common_expr=False)        # four distinct parts, though each is relu(x)
    x = g.input("x", (256,))                                     # 1 KiB each
    parts = [g.apply("relu", [x], name=f"p{i}")[0] for i in range(4)]
    (s,) = g.apply("sum_n", parts[:2], name="s")
    (s2,) = g.apply("accumulate", [s, parts[2]], name="s2")
    (s3,) = g.apply("accumulate", [s2, parts[3]], name="s3")
    (y,) = g.apply("tanh", [s3], name="y")
    order = g.default_order()
    lt = lifetimes(g, order)
    assert lt.inplace_of[s2] == s and lt.inplace_of[s3] == s2
    owns, end = lt.storage()
    assert owns[s] and not owns[s2] and not owns[s3]
    assert end[s] == lt.end[s3] == order.index(g.producer[y])   # the sum's storage lives until y
    # steps: p0..p3, s, s2, s3, y. At s2: the sum's storage, p2 and p3 (s2 adds none); at y:
    # the sum's storage and y.
    assert live_bytes_per_step(g, order).tolist() == [2048, 3072, 4096, 5120, 5120, 3072, 2048, 2048]
