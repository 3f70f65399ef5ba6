"""--allocator and --chunk-mib (engine/cli): resolved into PlanRequest.allocator, refused in one
line for a policy that cannot use the allocator, and paper 001's va running through the
executor on the cpu backend's real virtual memory, bit-identical with the sanitizer."""
import json
import re

import pytest

from engine.train import main, parser

SMALL = ["--model", "small-cnn", "--quiet", "--backend", "cpu", "--profile", "v100", "--iterations", "2",
         "--measure-iterations", "1"]


@pytest.mark.parametrize("argv,message", [
    (["--policy", "odswap", "--allocator", "va"], r"policy 'odswap' cannot use allocator 'va' \(it uses pool\)"),
    (["--policy", "window", "--allocator", "auto"], "policy 'window' cannot use allocator 'auto'"),
    (["--policy", "swapadvisor", "--allocator", "pool", "--chunk-mib", "2"], "not --allocator pool"),
    (["--policy", "window,odswap", "--allocator", "bestfit"], "policy 'odswap' cannot use allocator 'bestfit'"),
    (["--policy", "window", "--chunk-mib", "2"], "--chunk-mib sizes the chunks of --allocator va"),
    (["--policy", "window", "--allocator", "bestfit", "--chunk-mib", "2"], "not --allocator bestfit"),
    (["--policy", "window", "--allocator", "va", "--chunk-mib", "0.001"], "multiple of 4096 bytes"),
    (["--allocator", "buddy"], "argument --allocator: invalid choice: 'buddy'"),
])
def test_an_allocator_a_policy_cannot_use_is_one_line_and_status_2(argv, message, capsys):
    assert main(argv + SMALL) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("engine.train: ") and "\n" not in err and "Traceback" not in err
    assert re.search(message, err), err


def test_help_lists_the_allocators():
    text = parser().format_help()
    assert "--allocator {auto,pool,bestfit,va}" in text and "--chunk-mib" in text


@pytest.mark.parametrize("allocator", [["va", "--chunk-mib", "0.0625"], ["bestfit"]])
def test_window_trains_bit_identical_on_an_online_allocator(allocator, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["--policy", "ideal,window", "--allocator", *allocator, "--memory", "800KiB", "--sanitize",
            "--out", str(out), "--json", str(tmp_path / "report.json")] + SMALL
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "parameters identical to the unlimited run: yes (bit for bit)" in text
    settings = json.loads((tmp_path / "report.json").read_text())["settings"]
    assert settings["allocator"] == allocator[0]
    assert settings["chunk_bytes"] == (64 * 1024 if allocator[0] == "va" else None)
    plan = json.loads((out / "plan.json").read_text())
    assert plan["arena"]["allocator"]["name"] == allocator[0]
    if allocator[0] == "va":        # the page table travels with the plan
        assert plan["format"] == "swapengine.program/3" and plan["arena"]["mappings"]
        assert plan["arena"]["allocator"]["chunk_bytes"] == 64 * 1024
