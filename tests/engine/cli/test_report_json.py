"""engine/cli/report_json.py: --json follows engine/report.schema.json, keeps the keys scripts
read, names its profile and search, is written on failure, and --json - is standard output."""
import json

import jsonschema
import pytest

from engine.cli.report_json import FORMAT, schema
from engine.train import main

TINY = ["--model", "small-lstm", "--batch", "4", "--size", "3", "--quiet", "--search-seconds", "0",
        "--backend", "cpu"]
KEPT = {"policy", "sim_s", "real_s", "batch", "h2d_bytes", "d2h_bytes", "device_bytes", "instructions",
        "unlimited", "bound_s", "stalls", "samples_per_s", "x_bound"}    # today's keys: never renamed


def valid(doc: dict) -> dict:
    jsonschema.validate(doc, schema())
    assert doc["format"] == FORMAT and doc["tool"]["name"] == "swapengine"
    return doc


def test_the_schema_is_itself_valid():
    jsonschema.Draft202012Validator.check_schema(schema())


def test_a_training_report_follows_the_schema_and_keeps_its_keys(tmp_path, capsys):
    path = tmp_path / "r.json"
    assert main(TINY + ["--policy", "ideal,swapadvisor", "--iterations", "3", "--measure-iterations", "1",
                        "--json", str(path), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "profile measured on this machine's cpu backend" in out and "search none" in out
    r = valid(json.loads(path.read_text()))
    assert r["status"] == "ok" and r["error"] is None and r["identical"] is True and r["loss_finite"] is True
    assert r["model"] == "lstm-2x16" and r["budget"] == r["budget_bytes"] > 0 and r["backend"] == "cpu"
    assert r["profile"] == {"source": "measured", "device": "cpu", "path": None}
    assert r["search"]["policy"] == "swapadvisor" and r["search"]["stopped"] == "no search"
    assert r["settings"]["seed"] == 0 and r["settings"]["policies"] == ["ideal", "swapadvisor"]
    assert [p["policy"] for p in r["policies"]] == ["ideal", "swapadvisor"]
    assert all(KEPT <= set(p) and p["real_s"] > 0 for p in r["policies"])
    # how far to trust the measured times (issue 39): the load on both sides of the timing, the
    # cores it is compared with, each plan's fastest and slowest iteration; all in the schema
    assert r["usable_cores"] >= 1 and isinstance(r["timing_warnings"], list)
    assert {"load_average", "load_average_before"} <= set(r)
    assert all(0 < p["real_min_s"] <= p["real_s"] <= p["real_max_s"] for p in r["policies"])
    declared = schema()["properties"]
    assert {"load_average", "load_average_before", "usable_cores", "timing_warnings"} <= set(declared)
    assert {"real_spread", "real_min_s", "real_max_s"} <= set(declared["policies"]["items"]["properties"])


def test_a_simulated_report_names_its_analytic_profile_and_search_effort(tmp_path, capsys):
    path = tmp_path / "r.json"
    argv = TINY[:-4] + ["--search-generations", "1", "--population", "4", "--workers", "1", "--simulate-only",
                        "--profile", "v100", "--json", str(path), "--out", str(tmp_path)]
    assert main(argv) == 0
    r = valid(json.loads(path.read_text()))
    assert r["backend"] is None and r["profile"]["source"] == "analytic" and r["profile"]["device"] == "v100"
    assert r["search"]["generations"] == 1 and r["search"]["evaluations"] > 0
    assert "analytic v100" in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [(["--memory", "1KiB"], "the smallest budget that runs"),
                                          (["--batch", "0"], "must be positive")])
def test_a_failed_run_writes_its_report_with_the_error(tmp_path, capsys, argv, message):
    path = tmp_path / "r.json"
    assert main(TINY + argv + ["--json", str(path)]) == 2
    r = valid(json.loads(path.read_text()))
    assert r["status"] == "error" and message in r["error"] and "\n" not in r["error"]


def test_json_dash_is_standard_output_and_the_run_talks_on_stderr(tmp_path, capsys):
    assert main(TINY + ["--simulate-only", "--profile", "v100", "--json", "-", "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    r = valid(json.loads(out))
    assert r["status"] == "ok" and "swapadvisor" in err
    assert not (tmp_path / "-").exists()
