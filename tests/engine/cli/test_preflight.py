"""engine/cli/preflight.py and the flags: every bad input of issue 15 (items 3-9, 12) is one
line and exit status 2, before anything is planned, measured or trained."""
import json
import re

import numpy as np
import pytest

from engine.train import main
from engine.training import Trainer

TINY = ["--model", "small-lstm", "--batch", "4", "--size", "3", "--quiet", "--search-seconds", "0",
        "--backend", "cpu"]
FAST = TINY + ["--profile", "v100", "--policy", "swapadvisor", "--iterations", "2", "--no-check"]


def refused(argv, capsys, pattern: str) -> str:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    err = err.strip()
    assert err.startswith("engine.train: ") and "\n" not in err and "Traceback" not in err, err
    assert re.search(pattern, err), err
    assert "plan   " not in out and "train  " not in out, out        # refused before the work
    return err


@pytest.mark.parametrize("flag", ["--checkpoint", "--json", "--save-plan", "--save-profile", "--search-checkpoint",
                                  "--out"])
def test_an_unwritable_output_is_refused_before_the_work(tmp_path, capsys, flag):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    refused(FAST + [flag, str(blocker / "x" / "y.out")], capsys, rf"{flag} .*a-file' is a file, not a directory")


def test_an_output_path_that_is_a_directory_is_refused(tmp_path, capsys):
    refused(FAST + ["--checkpoint", str(tmp_path)], capsys, "is a directory; give a file name")


def _checkpoint(tmp_path, **run):
    path = str(tmp_path / "ck.npz")
    assert main(FAST + ["--checkpoint", path, "--out", str(tmp_path)] + [x for k, v in run.items()
                                                                        for x in (f"--{k}", str(v))]) == 0
    return path


def _zip_header(path, header):
    np.savez(path, __header__=np.array(json.dumps(header)))


@pytest.mark.parametrize("make,pattern", [
    (lambda p: p.write_bytes(b""), "is an empty file"),
    (lambda p: p.write_text("not, a, checkpoint\n"), "not an npz"),
    (lambda p: _zip_header(str(p), [1, 2]), "its header is 'list'"),
])
def test_corrupt_checkpoints_are_one_line(tmp_path, capsys, make, pattern):
    path = tmp_path / "ck.npz"
    make(path)
    refused(FAST + ["--resume", str(path)], capsys, pattern)


def test_a_truncated_checkpoint_is_one_line(tmp_path, capsys):
    path = _checkpoint(tmp_path)
    capsys.readouterr()
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])
    refused(FAST + ["--resume", path], capsys, "truncated or corrupt")


@pytest.mark.parametrize("flag", ["--load-plan", "--profile"])
def test_binary_plan_and_profile_files_are_one_line(tmp_path, capsys, flag):
    path = tmp_path / "x.json"
    path.write_bytes(bytes(range(256)) * 4)
    argv = [a for a in FAST if a not in ("--profile", "v100")] + [flag, str(path)]
    refused(argv, capsys, "is not text")


@pytest.mark.parametrize("state,pattern", [
    ({"identity": {}, "generation": 1}, "'population' is missing"),
    ({"identity": [1], "generation": 1, "population": [], "evaluations": 0, "elapsed_s": 0, "history": []},
     "'identity' is missing or not a dict"),
])
def test_malformed_search_checkpoints_are_one_line(tmp_path, capsys, state, pattern):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"format": "swapengine.ga-checkpoint/1", **state}))
    refused(TINY + ["--search-generations", "1", "--search-checkpoint", str(path), "--resume-search"], capsys,
            pattern)


def test_resume_search_needs_a_search_checkpoint(capsys):
    refused(TINY + ["--resume-search"], capsys, "give that too")


def test_a_plan_naming_tensors_that_do_not_exist_is_one_line(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    assert main(FAST + ["--simulate-only", "--save-plan", str(plan), "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    d = json.loads(plan.read_text())
    d["instructions"][0]["target"] = 10**6
    plan.write_text(json.dumps(d))
    assert main(FAST + ["--simulate-only", "--load-plan", str(plan), "--out", str(tmp_path), "--overwrite"]) == 2
    assert re.search(r"names (node|tensor) 1000000", capsys.readouterr().err)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_diverged_run_is_bit_identical_and_says_the_loss_is_not_finite(tmp_path, capsys):
    argv = TINY + ["--policy", "swapadvisor", "--iterations", "3", "--lr", "1e30", "--profile", "v100",
                   "--out", str(tmp_path), "--json", str(tmp_path / "r.json")]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "parameters identical to the unlimited run: yes" in out and "the loss is not finite" in err


@pytest.mark.parametrize("argv,pattern", [
    (["--lr", "inf"], "--lr: must be a finite positive number, got 'inf'"),
    (["--lr", "nan"], "--lr: must be a finite positive number"),
    (["--link-gbps", "inf"], "--link-gbps: must be a finite positive number"),
    (["--seed", "-1"], "--seed: must be 0 to 4294967295, got -1"),
    (["--seed", str(2**32)], "--seed: must be 0 to"),
    (["--batch", "1000000000"], "needs at least .* of host memory .* use a smaller --batch"),
])
def test_out_of_range_values_are_one_line(capsys, argv, pattern):
    refused(TINY + argv, capsys, pattern)


def test_a_checkpoint_refuses_other_settings_and_nothing_to_do_before_any_work(tmp_path, capsys):
    path = _checkpoint(tmp_path, seed=3, lr=0.01)
    capsys.readouterr()
    again = FAST + ["--resume", path, "--iterations", "5"]
    refused(again + ["--lr", "0.01"], capsys, r"saved with --seed 3, this run has --seed 0; pass --seed 3")
    refused(again + ["--seed", "3"], capsys, r"saved with --lr 0.01, this run has the default --lr; pass --lr 0.01")
    refused(again + ["--seed", "3", "--lr", "0.02"], capsys, r"saved with --lr 0.01, this run has --lr 0.02")
    refused(again[:-2] + ["--iterations", "2", "--seed", "3", "--lr", "0.01"], capsys,
            "is at iteration 2: --iterations 2 leaves nothing to do; pass --iterations above 2")
    refused(again + ["--seed", "3", "--lr", "0.01", "--model", "small-cnn"], capsys,
            "saved with --model small-lstm, this run has --model small-cnn")
    from zoo import small
    older = str(tmp_path / "older.npz")       # no settings recorded: the tensors decide
    Trainer(small.lstm(batch=4, steps=3, hidden=5), seed=0).save(older)
    refused(FAST + ["--resume", older, "--iterations", "5"], capsys, "does not fit this model: it was saved for model .lstm-2x5., this is .lstm-2x16.")
    assert main(again + ["--seed", "3", "--lr", "0.01", "--out", str(tmp_path), "--overwrite"]) == 0


def test_the_smallest_budget_printed_is_one_that_runs(tmp_path, capsys):
    err = refused(FAST + ["--simulate-only", "--memory", "1KiB"], capsys, "the smallest budget that runs")
    smallest = re.search(r"the smallest budget that runs this model is ([0-9.]+) (\w+)", err)
    assert main(FAST + ["--simulate-only", "--memory", "".join(smallest.groups()), "--out", str(tmp_path),
                        "--overwrite"]) == 0


@pytest.mark.parametrize("argv,pattern", [
    (["--policy", "ideal,odswap", "--load-plan", "p.json"], "--load-plan is about the searched policy's plan, but "
                                                             "--policy ideal,odswap has none; add swapadvisor"),
    (["--policy", "ideal", "--save-plan", "p.json"], "--save-plan is about the searched"),
    (["--simulate-only", "--checkpoint", "k.npz"], "--checkpoint is about training, which --simulate-only"),
    (["--load-plan", "p.json", "--search-checkpoint", "s.json"], "--load-plan runs a saved plan without searching"),
])
def test_conflicting_flags_are_refused(capsys, argv, pattern):
    refused(TINY + argv, capsys, pattern)


def test_resumed_trainer_keeps_its_checkpoint_header_settings(tmp_path):
    from zoo import small
    g = small.lstm(batch=2, steps=2, features=4, hidden=4, layers=1, classes=3)
    path = str(tmp_path / "k.npz")
    Trainer(g, seed=4).save(path, {"lr": 0.5})
    from engine import checkpoint
    header = checkpoint.read_header(path)
    assert header["seed"] == 4 and header["settings"] == {"lr": 0.5} and header["iteration"] == 0


# ---------------------------------------------------------------------- issue 39, defect 2
SEARCH = TINY + ["--profile", "v100", "--policy", "swapadvisor", "--simulate-only", "--search-generations", "1",
                 "--population", "4", "--workers", "1"]


@pytest.fixture(scope="module")
def saved_search(tmp_path_factory):
    path = tmp_path_factory.mktemp("search") / "s.json"
    assert main(SEARCH + ["--search-checkpoint", str(path), "--out", str(path.parent)]) == 0
    return json.loads(path.read_text())


@pytest.mark.parametrize("change,pattern", [
    (lambda s: s["population"][0].pop("schedule"), r"population entry 0 has no 'schedule'"),
    (lambda s: s.update(generation=-1), r"'generation' is -1; it counts generations from 0"),
    (lambda s: s.update(evaluations=-3), r"'evaluations' is -3"),
    (lambda s: s["population"][1].update(schedule=[0, 0, 1]), r"population entry 1's 'schedule' is not an order"),
    (lambda s: s["population"][0].update(allocation={"cls": "x"}), r"population entry 0's 'allocation'"),
    (lambda s: s["population"][0].update(time="fast"), r"population entry 0's 'time' is not a number"),
    (lambda s: s.update(best=s["population"][0] | {"schedule": 7}),
     r"the best individual's 'schedule' is not an order"),
    (lambda s: s["history"].append({"generation": 1}), r"history row \d+ .* 'elapsed_s'"),
    (lambda s: s.update(remembered=["zz"]), r"'remembered' holds 'zz', not a genome key"),
])
def test_a_search_checkpoint_with_bad_entries_is_one_line(tmp_path, capsys, saved_search, change, pattern):
    state = json.loads(json.dumps(saved_search))
    change(state)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(state))
    capsys.readouterr()
    refused(SEARCH + ["--search-checkpoint", str(path), "--resume-search", "--out", str(tmp_path)], capsys,
            rf"search checkpoint '.*s\.json' is malformed: {pattern}.*; delete it to search afresh$")


LONG = "x" * 300          # past NAME_MAX (255) on every common file system


@pytest.mark.parametrize("flag,name", [("--out", LONG), ("--checkpoint", LONG + ".npz"),
                                       ("--checkpoint", LONG + "/ck.npz"), ("--json", LONG + ".json"),
                                       ("--save-plan", LONG + "/p.json"), ("--load-plan", LONG + ".json")])
def test_a_name_too_long_is_refused_before_the_work(tmp_path, capsys, flag, name):
    refused(FAST + ["--out", str(tmp_path), flag, str(tmp_path / name)], capsys,
            rf"({flag}|plan file) .*x{{20}}.*name (is )?too long")


@pytest.mark.parametrize("address", ["garbage", "ray://256.1.1.1:99999", "10.0.0.1:0", "host:65536", "ray://:10001",
                                     "http://host:80", "ray://host", "bad_host!:6379", "1.2.3:80"])
def test_a_malformed_ray_address_is_refused_before_the_work(capsys, address):
    refused(FAST + ["--ray-address", address], capsys, rf"--ray-address {re.escape(address)}: .*'local', 'auto'")


@pytest.mark.parametrize("address", ["local", "auto", "ray://head.example.com:10001", "10.0.0.1:6379",
                                     "ray://[::1]:10001", "localhost:6379"])
def test_well_formed_ray_addresses_pass(address):
    from ga.ray_workers import address_problem
    assert address_problem(address) is None


# ---------------------------------------------------------------------- issue 39, defect 4
@pytest.mark.parametrize("flag", ["--checkpoint", "--search-checkpoint", "--json"])
def test_a_run_sweeps_stale_temporaries_of_its_outputs_at_start(tmp_path, capsys, flag):
    """A SIGKILL mid-save leaves TARGET.tmp-PID; the next run that writes TARGET removes it
    before its work (here the run is refused just after: a --resume that does not exist)."""
    import subprocess
    import sys
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    target = tmp_path / "out.file"
    stale = tmp_path / f"out.file.tmp-{dead.pid}"
    stale.write_bytes(b"half a checkpoint")
    refused(FAST + ["--out", str(tmp_path), flag, str(target), "--resume", str(tmp_path / "missing.npz")], capsys,
            "does not exist")
    assert not stale.exists()


def test_json_into_a_pipe_is_written_through_it(tmp_path, capsys):
    import os
    import stat
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert main(FAST + ["--simulate-only", "--out", str(tmp_path), "--json", str(fifo)]) == 0
        assert stat.S_ISFIFO(os.stat(fifo).st_mode)
        doc = json.loads(os.read(reader, 1 << 20))
    finally:
        os.close(reader)
    assert doc["status"] and doc["settings"]["model"] == "small-lstm"


@pytest.mark.parametrize("flag", ["--load-plan", "--profile", "--resume", "--search-checkpoint"])
def test_a_json_nesting_bomb_in_any_input_is_one_line(tmp_path, capsys, flag):
    bomb = "[" * 200_000 + "]" * 200_000
    path = tmp_path / "bomb"
    if flag == "--resume":
        np.savez(path, __header__=np.array(bomb))
        path = tmp_path / "bomb.npz"
    else:
        path.write_text(bomb)
    argv = [a for a in FAST if a not in ("--profile", "v100")] + (["--profile", "v100"] if flag != "--profile" else [])
    argv += [flag, str(path), "--out", str(tmp_path)] + (["--resume-search"] if flag == "--search-checkpoint" else [])
    refused(argv, capsys, "nested too deeply")


# ---------------------------------------------------------------------- issue 39, defect 3
@pytest.mark.parametrize("flag", ["--save-plan", "--save-profile", "--json", "--checkpoint"])
def test_an_output_goes_into_a_new_folder(tmp_path, capsys, flag):
    """--save-plan, --save-profile: a FileNotFoundError traceback after the work; --json: exit 0 and
    no report. Preflight allows a folder it can make, so the writer makes it."""
    target = tmp_path / "new" / "deeper" / "x.out"
    assert main(FAST + ["--out", str(tmp_path / "out"), flag, str(target)]) == 0
    assert target.stat().st_size > 0
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("argv,pattern", [
    (["--policy", "ideal,swapadvisor", "--window", "64KiB"],
     r"--window sizes the window policy's look-ahead, but --policy ideal,swapadvisor has no window; add window "
     r"to --policy or drop --window"),
    (["--policy", "ideal", "--allocator", "bestfit"],
     r"--allocator bestfit places the tensors of policies that plan under a budget, but --policy ideal has none "
     r"\(ideal holds every tensor, reference runs no plan\); drop --allocator or add one of odswap, swapadvisor"),
    (["--policy", "reference,ideal", "--allocator", "pool"], r"--allocator pool places .* --policy reference,ideal"),
    (["--policy", "odswap,capuchin", "--swap-only"],
     r"--swap-only turns recomputation off in swapadvisor, but --policy odswap,capuchin has none of them; add one "
     r"or drop --swap-only"),
])
def test_a_flag_that_changes_nothing_is_refused(capsys, argv, pattern):
    refused(TINY + argv, capsys, pattern)


@pytest.mark.parametrize("flag", ["--out", "--checkpoint", "--json", "--save-plan", "--save-profile",
                                  "--search-checkpoint", "--resume", "--load-plan", "--profile"])
def test_an_empty_file_name_is_refused(capsys, flag):
    """--out "" ran into runs/<model>, --checkpoint "" saved nothing, both with exit 0."""
    refused(FAST + [flag, ""], capsys, rf"{flag} '': an empty name; give a name or leave {flag} out")
