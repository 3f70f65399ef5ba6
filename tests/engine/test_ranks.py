"""Data-parallel ranks on a local Ray (engine/library/ranks.py, ray_ranks.py): two ranks on the
cpu backend under a budget, with the sanitizer, end bit for bit where the unlimited two-rank run
ends and where one rank accumulating the two micro-batches in rank order ends; a rank killed
with SIGKILL stops the run in one line naming it.

One local Ray for the module, with a small object store (the machine's memory is shared).
"""
import os
import signal

import numpy as np
import pytest

from engine.errors import UsageError
from engine.library.ranks import (RankSpec, check_spec, flatten, one_rank_accumulating, plan_ranks, rank_graphs,
                                  rank_order_sum, reduced_names, unflatten)
from engine.program import ALLREDUCE, SWAP_IN
from ga.ray_workers import local_runtime_env

ray = pytest.importorskip("ray")
pytest.importorskip("torch")        # Ray 2.60's gloo collective is torch.distributed's

STEPS = 3
UNLIMITED = RankSpec("small-cnn", batch=8, world=2, policy=None)
BUDGET = RankSpec("small-cnn", batch=8, world=2, policy="swapadvisor", sanitize=True)


@pytest.fixture(scope="module")
def local_ray():
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, object_store_memory=96 * 2**20, include_dashboard=False, log_to_driver=False,
                 runtime_env=local_runtime_env())
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def unlimited_run(local_ray):
    from engine.library.ray_ranks import train_ranks

    state, losses, _ = train_ranks(UNLIMITED, STEPS)
    return state, losses


def same(a: dict, b: dict, names=None) -> list[str]:
    """The names whose arrays differ (any bit), or are missing from one side."""
    names = sorted(set(a) | set(b)) if names is None else names
    return [k for k in names if k not in a or k not in b or not np.array_equal(a[k], b[k], equal_nan=True)]


def test_rank_order_sum_adds_in_rank_order():
    # 1e8 + 1 - 1e8 in float32: the order decides the bits
    parts = [np.array([1e8], np.float32), np.array([1.0], np.float32), np.array([-1e8], np.float32)]
    assert rank_order_sum(parts)[0] == np.float32(0.0)
    assert rank_order_sum([parts[0], parts[2], parts[1]])[0] == np.float32(1.0)


def test_buckets_round_trip_by_dtype():
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(4, np.float64), np.full((2, 2), 7, np.float32)]
    buckets = flatten(arrays)
    assert sorted(len(b) for b in buckets.values()) == [4, 10]        # one bucket per dtype
    back = unflatten(buckets, arrays)
    assert all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(back, arrays))


def test_a_batch_that_does_not_shard_is_refused():
    with pytest.raises(UsageError, match="multiple of --ranks 3"):
        check_spec(RankSpec("small-cnn", batch=8, world=3))


def test_budget_run_with_sanitizer_is_bit_identical_to_unlimited(unlimited_run):
    from engine.library.ray_ranks import train_ranks

    plans = plan_ranks(BUDGET)
    micro, _ = rank_graphs(BUDGET)
    assert plans.programs[0].bytes_moved(micro, SWAP_IN) > 0          # the budget makes the ranks swap
    state, losses, ranks = train_ranks(BUDGET, STEPS, plans=plans)
    assert len(ranks.info) == 2 and ranks.info[0]["pid"] != ranks.info[1]["pid"]
    ref_state, ref_losses = unlimited_run
    assert losses == ref_losses
    assert losses[0][0] != losses[0][1]                          # each rank ran its own shard
    assert same(state, ref_state) == []


def test_the_programs_own_allreduce_gives_the_same_bits(local_ray, unlimited_run):
    """The reduction as ALLREDUCE instructions of one training graph's swapping Program, run on the
    executor's fourth stream under the sanitizer, lands where the two-graph run does."""
    from engine.library.ray_ranks import train_ranks

    spec = RankSpec("small-cnn", batch=8, world=2, policy="swapadvisor", sanitize=True, in_program=True,
                    bucket_bytes=4096)
    plans = plan_ranks(spec)
    (program,) = plans.programs
    assert program.ranks == 2 and program.count(ALLREDUCE) > 1 and program.count(SWAP_IN) > 0
    state, losses, _ = train_ranks(spec, STEPS, plans=plans)
    ref_state, ref_losses = unlimited_run
    assert losses == ref_losses
    assert same(state, ref_state) == []


def test_two_ranks_give_one_rank_accumulating_in_rank_order(unlimited_run):
    state, _ = unlimited_run
    _, update = rank_graphs(UNLIMITED)
    # parameters and optimizer state: what the reduced gradients decide (batch norm's running
    # statistics are each rank's own)
    names = reduced_names(update)
    assert any(n.endswith(".momentum") for n in names) and not any(n.endswith(".grad_acc") for n in names)
    one = one_rank_accumulating(UNLIMITED, STEPS)
    assert names and same(state, one, names) == []
    # the results depend on N: one rank on the whole batch of 8 ends elsewhere
    whole = one_rank_accumulating(RankSpec("small-cnn", batch=8, world=1, policy=None), STEPS)
    assert set(names) <= set(whole) and same(state, whole, names) != []


def test_a_killed_rank_stops_the_run_in_one_line_naming_it(local_ray):
    from engine.library.ray_ranks import RankDied, start_ranks

    ranks = start_ranks(UNLIMITED, None)
    try:
        ranks.call("step")
        os.kill(ranks.info[1]["pid"], signal.SIGKILL)
        with pytest.raises(RankDied) as e:
            ranks.call("step")
        message = str(e.value)
        assert "\n" not in message and message.startswith("rank 1 of 2 died")
        assert ranks.actors == []                # the survivor was killed, not left in the collective
    finally:
        ranks.close()


def test_the_command_trains_on_two_ranks_and_rank_0_checkpoints_once(local_ray, tmp_path, capsys, unlimited_run):
    from engine import checkpoint
    from engine.cli.run import main

    ck = tmp_path / "ranks.npz"
    code = main(["--ranks", "2", "--model", "small-cnn", "--batch", "8", "--iterations", str(STEPS), "--sanitize",
                 "--checkpoint", str(ck), "--checkpoint-every", "1", "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "identical to one rank accumulating 2 micro-batches in rank order (unlimited memory): yes" in out
    header, arrays = checkpoint.read(str(ck))
    assert header["iteration"] == STEPS and header["settings"]["ranks"] == 2
    state, _ = unlimited_run                       # rank 0's whole state, running statistics included
    assert same(arrays, state) == []
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ranks")) == ["ranks.npz"]


def test_what_ranks_cannot_take_yet_is_one_line(capsys):
    from engine.cli.run import main

    assert main(["--ranks", "2", "--model", "small-cnn", "--batch", "8", "--swap-only"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "engine.train: --swap-only is not available with --ranks yet; leave it out, or train on one " \
                  "device without --ranks"


def test_a_run_killed_after_a_checkpoint_resumes_bit_identically(local_ray, tmp_path, capsys, unlimited_run):
    from engine import checkpoint
    from engine.cli.run import main
    from engine.library.ray_ranks import RankDied, train_ranks

    ck = tmp_path / "ck.npz"

    def after(step, losses, ranks):
        if step == 2:
            checkpoint.write(str(ck), {"graph": "small-cnn", "iteration": step, "seed": 0,
                                       "settings": {"ranks": 2}}, ranks.rank0("state"))
            os.kill(ranks.info[1]["pid"], signal.SIGKILL)

    with pytest.raises(RankDied, match="^rank 1 of 2 died during step"):
        train_ranks(UNLIMITED, STEPS, after_step=after)
    end = tmp_path / "end.npz"
    code = main(["--ranks", "2", "--model", "small-cnn", "--batch", "8", "--iterations", str(STEPS), "--resume",
                 str(ck),
                 "--checkpoint", str(end), "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "resumed from" in out and "at step 2; 1 to go" in out
    assert "identical to one rank accumulating 2 micro-batches in rank order (unlimited memory): yes" in out
    state, _ = unlimited_run
    assert same(checkpoint.read(str(end))[1], state) == []


def small_cnn_arrays(samples: int = 20) -> dict[str, np.ndarray]:
    """A user's data set for small-cnn (its input and label leaves by name), not the teacher's."""
    from engine.ir import Kind

    from engine.library.ranks import whole_graph

    g = whole_graph(UNLIMITED)          # the model's inputs (the micro graph adds its loss scale)
    rng = np.random.default_rng(7)
    out = {}
    for t in g.leaves(Kind.INPUT, Kind.LABEL):
        x = g.tensors[t]
        shape = (samples, *x.shape[1:])
        out[x.name] = (rng.integers(0, 10, shape) if x.dtype.kind in "iu" else rng.standard_normal(shape)
                       ).astype(x.dtype)
    return out


def test_the_ranks_train_on_their_shards_of_the_users_data(local_ray, tmp_path, capsys, unlimited_run):
    """--data with --ranks: rank r's shard at step k is micro-batch k*N + r of the user's arrays, so
    the exact check holds (one rank accumulating the two micro-batches of the same arrays)."""
    from engine import checkpoint
    from engine.cli.run import main

    data, ck = tmp_path / "data.npz", tmp_path / "ck.npz"
    np.savez(data, **small_cnn_arrays())
    code = main(["--ranks", "2", "--model", "small-cnn", "--batch", "8", "--iterations", str(STEPS), "--data",
                 str(data), "--checkpoint", str(ck), "--out", str(tmp_path / "run")])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "data   --data" in out and "20 samples" in out
    assert "identical to one rank accumulating 2 micro-batches in rank order (unlimited memory): yes" in out
    state, _ = unlimited_run                   # the synthetic data's run ends elsewhere: the arrays were used
    _, update = rank_graphs(UNLIMITED)
    assert same(checkpoint.read(str(ck))[1], state, reduced_names(update)) != []


def test_users_data_that_does_not_fit_is_one_line_before_ray(tmp_path, capsys):
    from engine.cli.run import main

    data = tmp_path / "data.npz"
    arrays = small_cnn_arrays()
    name = next(iter(arrays))
    np.savez(data, **{**arrays, name: arrays[name].astype(np.float64)})
    assert main(["--ranks", "2", "--model", "small-cnn", "--batch", "8", "--data", str(data)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"engine.train: --data {data}: '{name}' is float64")


def test_the_measured_bench_quick_mode_reports_every_figure(local_ray):
    """bench.ranks_measured's quick mode: structure, not timing (the figures are the machine's)."""
    from bench.ranks_measured import run

    lines, figures = run("small-cnn", 8, None, 2, 2.0, 1)
    text = "\n".join(lines)
    for label in ("simulated on the profile measured apart", "simulated on the profile measured as the ranks train",
                  "inside the Program", "outside the Program", "Ray round trip", "predicted step",
                  "measured step on the driver", "CPU seconds per step", "measured / simulated", "share of a core",
                  "load average"):
        assert label in text
    assert all(np.isfinite(v) and v > 0 for k, v in figures.items() if k != "outside")
    assert figures["predicted"] == pytest.approx(figures["trained"] + figures["outside"] + figures["call"])
    assert figures["predicted_apart"] == pytest.approx(figures["simulated"] + figures["outside"] + figures["call"])
    assert figures["program"] <= figures["rank_wall"]


def test_the_ranks_run_the_plan_searched_under_their_shared_host(local_ray, tmp_path, unlimited_run):
    """--search-seconds with --ranks: the genetic search plans each rank graph on the driver, its
    fitness the simulator on a profile whose two ranks share 4 GB/s of host; its plan, faster there
    than the unsearched one, is the one every rank runs (their digests), and the run ends bit for bit
    where the unlimited run does."""
    from dataclasses import replace

    from engine.library.ray_ranks import train_ranks
    from engine.profile import HostShare, analytic_profile
    from ga.search import SearchOptions

    path = tmp_path / "host.json"
    replace(analytic_profile("v100"), host=HostShare(ranks=2, bytes_per_s=4e9)).save(str(path))
    base = RankSpec("small-cnn", batch=8, world=2, policy="swapadvisor", memory=160 * 2**10, profile=str(path),
                    sanitize=True)
    spec = replace(base, search=SearchOptions(population=8, seed=0, workers=1, max_generations=2, progress=False))
    unsearched, plans = plan_ranks(base), plan_ranks(spec)
    assert plans.searched == 1 and plans.seconds[0] < unsearched.seconds[0]      # the micro graph's plan
    assert plans.digests()[0] != unsearched.digests()[0]
    state, losses, ranks = train_ranks(spec, STEPS, plans=plans)
    assert [info["plans"] for info in ranks.info] == [plans.digests()] * 2
    ref_state, ref_losses = unlimited_run
    assert losses == ref_losses and same(state, ref_state) == []
