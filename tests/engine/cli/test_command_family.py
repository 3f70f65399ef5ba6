"""The four commands are one family (issue 39, "a newcomer's first hour"): a flag two of them
share has one default and one help; --version and --json are everywhere; a bad flag is
argparse's ``prog: error: ...`` line, and a bad --model the project's ``prog: --model X: ...``
line, printed before anything else (the backend's detection included); both exit 2."""
import json

import jsonschema
import pytest

from engine.cli import flags, infer, serve, stream_run
from engine.cli.report_json import FORMAT, schema
from engine.cli.run import main as train_main

COMMANDS = {"engine.train": (flags.parser, train_main), "engine.infer": (infer.parser, infer.main),
            "engine.serve": (serve.parser, serve.main), "engine.stream_train": (stream_run.parser, stream_run.main)}
# Shared flags whose default is the command's own (what it runs differs); their help begins alike.
OWN_DEFAULT = {"--model", "--memory", "--policy", "--search-seconds"}
EXPECTED_SHARED = {"--version", "--json", "--model", "--batch", "--size", "--memory", "--policy", "--seed",
                   "--backend", "--device", "--link-gbps", "--sanitize", "--profile", "--search-seconds",
                   "--simulate-only", "--iterations", "--optimizer", "--lr"}


def options(parser) -> dict:
    return {s: a for a in parser._actions for s in a.option_strings if s.startswith("--") and s != "--help"}


def shared_flags() -> dict[str, dict]:
    """flag -> {command: its argparse action}, for every flag two commands or more have."""
    by_flag: dict[str, dict] = {}
    for prog, (parser, _) in COMMANDS.items():
        for flag, action in options(parser()).items():
            by_flag.setdefault(flag, {})[prog] = action
    return {f: acts for f, acts in by_flag.items() if len(acts) > 1}


def test_the_shared_flags_are_the_ones_expected():
    assert EXPECTED_SHARED <= set(shared_flags())


@pytest.mark.parametrize("flag", sorted(EXPECTED_SHARED - OWN_DEFAULT))
def test_a_shared_flag_has_one_default_one_help_one_type(flag):
    actions = shared_flags()[flag]
    first = next(iter(actions.values()))
    for prog, a in actions.items():
        assert a.default == first.default, (flag, prog, a.default, first.default)
        assert a.help == first.help, (flag, prog)
        assert (a.type, a.choices, a.metavar, a.nargs) == (first.type, first.choices, first.metavar, first.nargs), \
            (flag, prog)


def test_the_backend_is_auto_and_the_profile_the_same_rule_everywhere():
    shared = shared_flags()
    assert {a.default for a in shared["--backend"].values()} == {"auto"}
    assert set(shared["--backend"]) == set(COMMANDS) and set(shared["--profile"]) == set(COMMANDS)
    assert {a.default for a in shared["--profile"].values()} == {None}
    assert "measured on the backend that runs" in next(iter(shared["--profile"].values())).help


@pytest.mark.parametrize("flag", sorted(OWN_DEFAULT))
def test_a_default_of_the_commands_own_is_said_in_a_help_that_begins_alike(flag):
    from engine.cli.common_flags import HELP_STEM, OWN_DEFAULT as DECLARED

    assert set(DECLARED) == OWN_DEFAULT          # each with its reason, in one place
    for prog, a in shared_flags()[flag].items():
        assert a.help.startswith(HELP_STEM[flag]) and "default" in a.help, (flag, prog, a.help)


@pytest.mark.parametrize("prog", COMMANDS)
def test_version_and_json_in_every_command(prog, capsys):
    parser, main = COMMANDS[prog]
    assert {"--version", "--json"} <= set(options(parser()))
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("swapengine ") and out.count("\n") == 1


@pytest.mark.parametrize("prog", COMMANDS)
def test_an_unknown_flag_is_one_argparse_line_exit_2(prog, capsys):
    _, main = COMMANDS[prog]
    assert main(["--frobnicate", "3"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"{prog}: error: unrecognized arguments: --frobnicate 3 (see --help)\n", err


@pytest.mark.parametrize("prog", COMMANDS)
def test_a_bad_value_the_parser_refuses_is_the_same_line_everywhere(prog, capsys):
    _, main = COMMANDS[prog]
    assert main(["--seed", "-1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"{prog}: error: argument --seed: must be 0 to 4294967295, got -1 (see --help)\n"


@pytest.mark.parametrize("prog", COMMANDS)
def test_a_bad_model_is_refused_before_anything_is_printed(prog, capsys):
    """The default --backend auto detects a backend and says so on the run's first line: a bad
    --model used to come after that line in engine.train."""
    _, main = COMMANDS[prog]
    assert main(["--model", "nope"]) == 2
    out, err = capsys.readouterr()
    assert out == "", out
    assert err.startswith(f"{prog}: --model nope: unknown model 'nope'; this command takes ")
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("prog, model, says", [
    ("engine.train", "resnet-50", "--model resnet-50 is a forward-only model"),
    ("engine.infer", "small-cnn", "--model small-cnn is a training model; this command runs forward-only models"),
    ("engine.serve", "gpt-tiny", "--model gpt-tiny is a training model; this command runs forward-only models"),
    ("engine.stream_train", "small-lstm", "--model small-lstm is not a model this command runs"),
])
def test_a_model_of_another_command_is_refused_in_one_line(prog, model, says, capsys):
    _, main = COMMANDS[prog]
    assert main(["--model", model]) == 2
    out, err = capsys.readouterr()
    assert out == "" and says in err and err.count("\n") == 1, err


def valid(path) -> dict:
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, schema())
    assert doc["format"] == FORMAT and doc["tool"]["name"] == "swapengine"
    return doc


def test_a_refused_run_of_another_command_still_writes_its_report(tmp_path, capsys):
    path = tmp_path / "r.json"
    assert serve.main(["--json", str(path), "--rate", "0"]) == 2
    r = valid(path)
    assert r["program"] == "engine.serve" and r["status"] == "error" and "--rate" in r["error"]


def test_infer_reports_its_settings_and_each_budget(tmp_path, capsys):
    path = tmp_path / "r.json"
    argv = ["--model", "resnet-14", "--size", "64", "--memory", "50%,100%", "--simulate-only", "--json", str(path)]
    assert infer.main(argv) == 0
    r = valid(path)
    assert r["program"] == "engine.infer" and r["status"] == "ok" and r["settings"]["memory"] == "50%,100%"
    assert r["batch"] == 1 and r["backend"] is None and r["profile"]["source"] == "analytic"
    assert len(r["budgets"]) == 2 and all(b["sim_s"] > 0 for b in r["budgets"])


def test_serve_reports_its_latencies_on_standard_output(capsys):
    argv = ["--model", "resnet-14", "--size", "16", "--batch", "2", "--models", "2", "--memory", "1GiB",
            "--rate", "20", "--seconds", "0.5", "--profile", "v100", "--json", "-"]
    assert serve.main(argv) == 0
    out, err = capsys.readouterr()
    r = json.loads(out)                          # the run's own lines went to stderr
    jsonschema.validate(r, schema())
    assert r["program"] == "engine.serve" and r["backend"] == "cpu" and r["models"] == 2
    assert 0 < r["latency_p50_s"] <= r["latency_p99_s"] and "latency p50" in err


def test_stream_train_reports_its_figures(tmp_path, capsys):
    path = tmp_path / "r.json"
    assert stream_run.main(["--iterations", "3", "--check", "--json", str(path)]) == 0
    r = valid(path)
    assert r["program"] == "engine.stream_train" and r["identical"] is True and r["iterations"] == 3
    assert r["profile"] == {"source": "analytic", "device": "v100", "path": None} and r["backend"] == "cpu"
