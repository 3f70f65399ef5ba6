"""Issue 39, a newcomer's first hour: each run in its own folder, a per-iteration record,
settings replayed from a file, the user's own data in, trained weights out."""
import json
import os

import numpy as np
import pytest

from engine import api as se
from engine.cli.report_json import schema
from engine.cli.run import loss_ends
from engine.cli.run_folder import read_steps
from engine.ir import Kind
from engine.train import main

# The numpy reference trains without planning: these tests need no numba compile.
REF = ["--model", "small-lstm", "--batch", "4", "--size", "3", "--quiet", "--policy", "reference"]


def report(path) -> dict:
    import jsonschema
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, schema())
    return doc


def one_line(capsys, *parts) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("engine.train: ") and "\n" not in err and "Traceback" not in err, err
    for part in parts:
        assert part in err, err
    return err


def small_lstm_arrays(samples=10, seed=3) -> dict:
    rng = np.random.default_rng(seed)
    arrays = {f"x{i}": rng.standard_normal((samples, 8)).astype(np.float32) for i in range(3)}
    arrays["loss_labels"] = rng.integers(0, 5, size=samples).astype(np.int32)
    return arrays


# ---------------------------------------------------------------------- run folders
def test_runs_without_out_never_share_a_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("a.json", "b.json"):
        assert main(REF + ["--iterations", "2", "--json", name]) == 0
    a, b = report(tmp_path / "a.json"), report(tmp_path / "b.json")
    assert a["run_dir"] != b["run_dir"]
    for r in (a, b):
        assert os.path.dirname(r["run_dir"]) == os.path.join("runs", "lstm-2x16")
        assert os.path.isfile(r["steps_path"]) and os.path.dirname(r["steps_path"]) == r["run_dir"]


def test_an_out_holding_a_run_is_refused_before_work_unless_overwrite(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(REF + ["--iterations", "3", "--out", str(out)]) == 0
    first = (out / "steps.jsonl").read_text()
    capsys.readouterr()
    assert main(REF + ["--iterations", "2", "--out", str(out)]) == 2
    one_line(capsys, "already holds a run (steps.jsonl)", "--overwrite")
    assert (out / "steps.jsonl").read_text() == first            # untouched
    assert main(REF + ["--iterations", "2", "--out", str(out), "--overwrite"]) == 0
    assert len(read_steps(str(out / "steps.jsonl"))) == 2


def test_overwrite_without_out_is_refused(capsys):
    assert main(REF + ["--overwrite"]) == 2
    one_line(capsys, "--overwrite replaces the run in --out DIR")


# ---------------------------------------------------------------------- steps.jsonl
def test_steps_has_one_line_per_iteration_with_the_losses_behind_the_reported_means(tmp_path, capsys):
    path = tmp_path / "r.json"
    assert main(REF + ["--iterations", "7", "--json", str(path), "--out", str(tmp_path / "run")]) == 0
    r = report(path)
    assert r["steps_path"] == str(tmp_path / "run" / "steps.jsonl")
    assert r["steps_path"] in capsys.readouterr().out
    steps = read_steps(r["steps_path"])
    assert [s["iteration"] for s in steps] == list(range(1, 8))
    assert all(set(s) == {"iteration", "loss", "seconds"} and s["seconds"] > 0 for s in steps)
    first, last, _ = loss_ends([s["loss"] for s in steps])
    assert (first, last) == (r["loss_first"], r["loss_last"])          # exact: JSON round-trips floats
    ref = se.train(se.model("small-lstm", batch=4, size=3), None, iterations=7)
    assert [s["loss"] for s in steps] == ref.losses


def test_a_resumed_run_numbers_its_steps_from_the_checkpoint(tmp_path):
    ck = str(tmp_path / "ck.npz")
    assert main(REF + ["--iterations", "3", "--checkpoint", ck, "--out", str(tmp_path / "a")]) == 0
    assert main(REF + ["--iterations", "5", "--resume", ck, "--out", str(tmp_path / "b")]) == 0
    assert [s["iteration"] for s in read_steps(str(tmp_path / "b" / "steps.jsonl"))] == [4, 5]


def test_a_loss_that_is_not_finite_is_recorded_as_null(tmp_path):
    from engine.cli.run_folder import StepRecords
    with StepRecords(str(tmp_path)) as steps:
        steps.add(1, float("nan"), 0.5)
        steps.add(2, 1.25, 0.25)
    assert read_steps(str(tmp_path / "steps.jsonl")) == [{"iteration": 1, "loss": None, "seconds": 0.5},
                                                          {"iteration": 2, "loss": 1.25, "seconds": 0.25}]


# ---------------------------------------------------------------------- --config
def test_config_replays_the_settings_a_report_recorded(tmp_path):
    first, again = tmp_path / "first.json", tmp_path / "again.json"
    settings = ["--iterations", "3", "--seed", "7", "--lr", "0.02", "--momentum", "0.5", "--no-check",
                "--backend", "cpu", "--link-gbps", "4", "--search-seconds", "0"]
    assert main(REF + settings + ["--json", str(first), "--out", str(tmp_path / "a")]) == 0
    assert main(["--config", str(first), "--json", str(again), "--out", str(tmp_path / "b")]) == 0
    a, b = report(first), report(again)
    assert a["settings"] == b["settings"] and a["settings"]["seed"] == 7 and a["settings"]["check"] is False
    assert read_steps(a["steps_path"]) != [] and \
        [s["loss"] for s in read_steps(a["steps_path"])] == [s["loss"] for s in read_steps(b["steps_path"])]
    # the settings object alone works too, and a flag typed beside --config wins
    (tmp_path / "s.json").write_text(json.dumps(a["settings"]))
    assert main(["--config", str(tmp_path / "s.json"), "--iterations", "2", "--json", str(again),
                 "--out", str(tmp_path / "c")]) == 0
    assert report(again)["settings"] == {**a["settings"], "iterations": 2}


@pytest.mark.parametrize("content,message", [
    ({"model": "small-lstm", "batchsize": 4}, "unknown setting 'batchsize'; known: model, batch"),
    ({"batch": 0}, "setting 'batch': argument --batch: must be positive, got 0"),
    ({"batch": "4"}, "setting 'batch' is '4'; give int"),
    ({"sanitize": 1}, "setting 'sanitize' is 1; give bool"),
    ({"policies": ["magic"]}, "setting 'policies': argument --policy: unknown policy 'magic'"),
    ([1, 2], "holds no settings object"),
    ({"format": "other/1"}, "is a 'other/1' document"),
])
def test_a_bad_config_is_one_line_and_status_2(tmp_path, capsys, content, message):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(content))
    assert main(["--config", str(path)]) == 2
    one_line(capsys, f"config file '{path}'", message)
    assert capsys.readouterr().out == ""


def test_a_missing_or_broken_config_file_is_one_line(tmp_path, capsys):
    assert main(["--config", str(tmp_path / "none.json")]) == 2
    one_line(capsys, "config file", "does not exist")
    (tmp_path / "bad.json").write_text("{model: 1")
    assert main(["--config", str(tmp_path / "bad.json")]) == 2
    one_line(capsys, "is not valid JSON")


# ---------------------------------------------------------------------- --data
def test_data_from_an_npz_trains_as_the_same_arrays_through_the_api(tmp_path):
    arrays = small_lstm_arrays()
    np.savez(tmp_path / "d.npz", **arrays)
    r = tmp_path / "r.json"
    assert main(REF + ["--iterations", "6", "--data", str(tmp_path / "d.npz"), "--json", str(r),
                       "--out", str(tmp_path / "run")]) == 0
    cli_losses = [s["loss"] for s in read_steps(report(r)["steps_path"])]
    g = se.model("small-lstm", batch=4, size=3)
    assert cli_losses == se.train(g, None, iterations=6, data=arrays).losses
    assert cli_losses == se.train(g, None, iterations=6, data=str(tmp_path / "d.npz")).losses
    assert cli_losses != se.train(g, None, iterations=6).losses             # not the synthetic data


def test_data_trains_under_a_plan_bit_identically_to_the_unlimited_run(tmp_path, capsys):
    arrays = small_lstm_arrays()
    np.savez(tmp_path / "d.npz", **arrays)
    argv = REF[:-1] + ["ideal", "--backend", "cpu", "--profile", "v100", "--search-seconds", "0", "--iterations",
                       "3", "--data", str(tmp_path / "d.npz"), "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    assert "parameters identical to the unlimited run: yes" in capsys.readouterr().out
    g = se.model("small-lstm", batch=4, size=3)
    steps = read_steps(str(tmp_path / "run" / "steps.jsonl"))
    assert [s["loss"] for s in steps] == se.train(g, None, iterations=3, data=arrays).losses


def test_the_api_takes_an_iterator_of_batches():
    g = se.model("small-lstm", batch=4, size=3)
    arrays = small_lstm_arrays(samples=12)
    batches = [{k: a[i * 4:(i + 1) * 4] for k, a in arrays.items()} for i in range(3)]
    run = se.train(g, None, iterations=3, data=iter(batches))
    assert len(run.losses) == 3 and all(np.isfinite(run.losses))
    with pytest.raises(se.EngineError, match="the batches ran out after 3; give one per iteration"):
        se.train(g, None, iterations=4, data=iter(batches))


@pytest.mark.parametrize("change,message", [
    (lambda a: a.pop("x2"), "no array named 'x2'; the graph's inputs are x0 [N, 8] float32"),
    (lambda a: a.update(extra=np.zeros(10)), "'extra' feeds no input of lstm-2x16"),
    (lambda a: a.update(x0=a["x0"].astype(np.float64)), "'x0' is float64, the graph's input is float32; cast it"),
    (lambda a: a.update(x1=a["x1"][:, :5]), "'x1' has shape [10, 5]; the graph's inputs are"),
    (lambda a: a.update(x1=a["x1"][:7]), "'x1' has 7 samples and the arrays before it 10"),
    (lambda a: a.update(loss_labels=np.full(10, 5, np.int32)), "'loss_labels' holds 5, outside 0..4 (the 5 classes"),
])
def test_data_that_does_not_fit_the_model_is_one_line_before_any_work(tmp_path, capsys, change, message):
    arrays = small_lstm_arrays()
    change(arrays)
    np.savez(tmp_path / "d.npz", **arrays)
    assert main(REF + ["--data", str(tmp_path / "d.npz"), "--out", str(tmp_path / "run")]) == 2
    one_line(capsys, f"--data {tmp_path / 'd.npz'}: ", message)
    assert not (tmp_path / "run").exists()


def test_a_data_file_that_is_not_an_npz_or_holds_objects_is_refused(tmp_path, capsys):
    (tmp_path / "d.npz").write_text("hello")
    assert main(REF + ["--data", str(tmp_path / "d.npz")]) == 2
    one_line(capsys, "data file", "not an npz (zip) file")
    np.savez(tmp_path / "o.npz", x0=np.array([{"a": 1}], dtype=object))
    assert main(REF + ["--data", str(tmp_path / "o.npz")]) == 2
    one_line(capsys, "never unpickled")


# ---------------------------------------------------------------------- --save-weights
def test_weights_saved_as_safetensors_read_back_bit_identically(tmp_path, capsys):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    ck, w, n = str(tmp_path / "ck.npz"), tmp_path / "w.safetensors", tmp_path / "w.npz"
    r = tmp_path / "r.json"
    assert main(REF + ["--iterations", "3", "--checkpoint", ck, "--save-weights", str(w), "--json", str(r),
                       "--out", str(tmp_path / "a")]) == 0
    assert report(r)["weights_path"] == str(w)
    assert main(REF + ["--iterations", "3", "--save-weights", str(n), "--out", str(tmp_path / "b")]) == 0
    g = se.model("small-lstm", batch=4, size=3)
    trained = se.train(g, None, iterations=3)
    names = {g.tensors[t].name for t in g.leaves(Kind.PARAMETER)}
    got = safetensors_numpy.load_file(str(w))
    assert set(got) == names                                   # parameters only, not the optimizer's state
    with np.load(n) as z:
        assert set(z.files) == names
        for name in names:
            for a in (got[name], z[name]):
                assert a.dtype == trained.state[name].dtype and a.tobytes() == trained.state[name].tobytes()


def test_the_api_writes_float64_safetensors_that_torch_reads_bit_identically(tmp_path):
    torch_reader = pytest.importorskip("safetensors.torch")
    g = se.model("small-lstm", batch=4, size=3, dtype="float64")
    trained = se.train(g, None, iterations=2)
    se.save_weights(g, trained, str(tmp_path / "w.safetensors"))
    got = torch_reader.load_file(str(tmp_path / "w.safetensors"))
    assert set(got) == {g.tensors[t].name for t in g.leaves(Kind.PARAMETER)}
    for name, t in got.items():
        a = t.numpy()
        assert a.dtype == np.float64 and a.shape == trained.state[name].shape
        assert a.tobytes() == trained.state[name].tobytes()
    from safetensors import safe_open
    with safe_open(str(tmp_path / "w.safetensors"), framework="pt") as f:   # Hugging Face checks the format
        assert f.metadata() == {"format": "pt", "model": g.name}


@pytest.mark.parametrize("argv,message", [
    (["--save-weights", "w.pt"], "--save-weights w.pt: the extension says the format; end the name with "
                                 ".safetensors or .npz"),
    (["--save-weights", "afile/w.npz"], "--save-weights afile/w.npz: '"),     # ...afile' is a file, not a directory
    (["--save-weights", "w.npz", "--simulate-only"], "--save-weights is about training"),
    (["--data", "d.npz", "--simulate-only"], "--data is about training"),
])
def test_bad_weights_or_data_flags_are_one_line(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("")
    assert main(REF + argv) == 2
    one_line(capsys, message)
