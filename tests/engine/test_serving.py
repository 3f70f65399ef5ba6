"""The serving simulation on cases computed by hand, and the server's answers and errors."""
import numpy as np
import pytest

from engine.serving import (Arrivals, Costs, ServingError, fifo_completions, poisson_arrivals, service_times,
                            simulate_serving)

COSTS = Costs(full_s=0.1, partitioned_s=0.15, load_s=0.05, resident_models=1, stream_s=0.08)


def test_first_come_first_served_by_hand():
    done = fifo_completions(np.array([0.0, 0.05, 0.3]), np.array([0.1, 0.1, 0.1]))
    assert np.allclose(done, [0.1, 0.2, 0.4])
    lat = simulate_serving("not_shared", COSTS, Arrivals(np.array([0.0, 0.05, 0.3]), np.zeros(3, int)), batch=4)
    assert np.allclose(lat.seconds, [0.1, 0.15, 0.1])
    assert lat.busy_fraction == pytest.approx(0.3 / 0.4)
    assert lat.throughput_rps == pytest.approx(12 / 0.4)


def test_time_shared_loads_a_model_not_resident_and_evicts_the_least_recent():
    # one model fits: 0 loads, 0 stays, 1 evicts 0, 0 loads again
    assert np.allclose(service_times("time_shared", COSTS, [0, 0, 1, 0]), [0.15, 0.1, 0.15, 0.15])
    two = Costs(0.1, 0.15, 0.05, resident_models=2)
    assert np.allclose(service_times("time_shared", two, [0, 1, 0, 2, 0, 1]), [0.15, 0.15, 0.1, 0.15, 0.1, 0.15])


def test_partitioned_with_and_without_prefetch_by_hand():
    arrivals = Arrivals(np.array([0.0, 0.01]), np.array([0, 1]))
    # without: one plan after another, 0.15 each
    assert np.allclose(simulate_serving("partitioned", COSTS, arrivals, 1).seconds, [0.15, 0.29])
    # with: model 1's stream starts when the link is free (0.08), ends by max(0.15 + 0.1, 0.08 + 0.15)
    assert np.allclose(simulate_serving("partitioned", COSTS, arrivals, 1, prefetch=True).seconds, [0.15, 0.24])
    # the same model's next batch waits for its previous one before streaming
    same = Arrivals(np.array([0.0, 0.01]), np.array([0, 0]))
    assert np.allclose(simulate_serving("partitioned", COSTS, same, 1, prefetch=True).seconds, [0.15, 0.29])


def test_warmup_batches_are_not_counted():
    arrivals = Arrivals(np.array([0.0, 0.0, 0.0]), np.zeros(3, int))
    assert np.allclose(simulate_serving("not_shared", COSTS, arrivals, 1, warmup=1).seconds, [0.2, 0.3])


def test_poisson_arrivals_rate_and_models():
    a = poisson_arrivals(100.0, 4, 3, 20000, seed=1)
    assert np.all(np.diff(a.times) > 0)
    assert 4 * len(a.times) / a.times[-1] == pytest.approx(100.0, rel=0.03)
    assert set(np.unique(a.models)) == {0, 1, 2}


@pytest.mark.parametrize("args", [(0.0, 1, 1, 10), (10.0, 0, 1, 10), (10.0, 1, 0, 10)])
def test_bad_arrivals_one_line(args):
    with pytest.raises(ServingError, match="rate above 0"):
        poisson_arrivals(*args)


def test_unknown_strategy_and_no_room():
    with pytest.raises(ServingError, match="unknown strategy 'shared'"):
        service_times("shared", COSTS, [0])
    with pytest.raises(ServingError, match="at least one model"):
        service_times("time_shared", Costs(0.1, 0.1, 0.1, 0), [0])


# ---------------------------------------------------------------------------- the server
def test_server_answers_each_model_with_its_own_weights_bit_identically():
    from engine.backend_registry import choose
    from engine.library import inference as infer
    from engine.training import ReferenceRunner
    from engine.library.server import Server

    server = Server("resnet-14", models=2, device_bytes=2**30, batch=2, size=16)
    try:
        g = server.graph
        feeds = {g.leaves()[0]: np.random.default_rng(0).standard_normal(g.tensors[g.leaves()[0]].shape
                                                                       ).astype(np.float32)}
        feeds = {t: a for t, a in feeds.items() if g.tensors[t].kind.name == "INPUT"}
        outs = [server.submit(m, feeds).result() for m in range(2)]
        assert len(server.latencies) == 2 and set(server.percentiles()) == {50, 99}
        with pytest.raises(ServingError, match="model 2 is not served"):
            server.submit(2)
    finally:
        server.close()
    placement = choose("cpu")
    for m in range(2):
        ref = infer.InferenceRun(g, ReferenceRunner(g), seed=m).batch(feeds)
        assert infer.same_outputs([outs[m]], [ref])
    assert not infer.same_outputs([outs[0]], [outs[1]])      # their own weights
    assert placement.kind.name == "cpu"


def test_server_refuses_a_share_too_small_in_one_line():
    from engine.library.server import Server

    with pytest.raises(ServingError, match="each share of .* is below"):
        Server("resnet-14", models=4, device_bytes=2**20, batch=2, size=16)


def test_serve_main_one_line_error(capsys):
    from engine.cli.serve import main

    assert main(["--model", "resnet-14", "--size", "16", "--batch", "2", "--memory", "1KiB", "--seconds", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "below" in err[0]
