"""bench/cuda_timeline.py, checked without a GPU on the fake CUDA (tests/engine/backends/fake_driver.py),
whose copies take 5 us plus their bytes at 1 GB/s on a clock each recorded event ticks by 1 us: one timed eager iteration
lines up with the Program instruction by instruction, and main() prints its tables and saves both
timelines."""
import numpy as np
import pytest

import bench.cuda_timeline as timeline
import zoo
from bench.cuda_vs_torch import RandomData
from engine.liveness import peak_bytes
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT
from planner.policy import plan_with
from tests.engine.backends import fake_driver


def test_the_timed_iteration_lines_up_with_the_program(monkeypatch):
    fake_driver.install(monkeypatch)
    g = zoo.build("rnn-1-1k", batch=8, size=3)
    program = plan_with("swapadvisor", g, peak_bytes(g) // 2)
    start, finish = timeline.timed_iteration(g, program, RandomData(g))
    kinds = np.array([ins.kind for ins in program.instrs])
    drops = np.array([ins.kind == SWAP_OUT and not ins.copy for ins in program.instrs])
    assert np.isnan(start[drops]).all() and not np.isnan(start[~drops]).any()    # only drops untimed
    assert (finish[~drops] >= start[~drops]).all()
    # Each copy: its bytes at 1 GB/s, 5 us, and the 1 us tick of the fake's closing event.
    copies = [i for i, ins in enumerate(program.instrs) if ins.kind in (SWAP_IN, SWAP_OUT) and not drops[i]]
    assert copies and (kinds == COMPUTE).sum() > 0
    for i in copies:
        expected = 6e-6 + g.tensors[program.instrs[i].target].nbytes / 1e9
        assert finish[i] - start[i] == pytest.approx(expected, rel=1e-6, abs=1e-9)


def test_main_prints_issue_costs_and_both_timelines(monkeypatch, tmp_path, capsys):
    from engine.cuda_profiling import measure_cuda_profile
    from planner.policy import unlimited_program
    fake_driver.install(monkeypatch)
    monkeypatch.setattr(timeline, "detect_gpu", lambda: (1, ""))
    g = zoo.build("rnn-1-1k", batch=8, size=3)
    profile_path = tmp_path / "profile.json"
    measure_cuda_profile(g, unlimited_program(g), data=RandomData(g), iterations=1).save(str(profile_path))
    saved = tmp_path / "timelines.npz"
    assert timeline.main(["--model", "rnn-1-1k", "--batch", "8", "--size", "3", "--budget", "0.5",
                          "--iterations", "1", "--profile", str(profile_path), "--save", str(saved)]) == 0
    out = capsys.readouterr().out
    issue_table = out.split("\n\n")[1]
    assert issue_table.count("graph replay") == 2 and issue_table.count("per instruction") == 2
    for stream in ("compute", "swap_in", "swap_out", "compute idle", "span"):
        assert f"measured    {stream}" in out and f"simulated   {stream}" in out
    with np.load(saved) as z:
        assert len(z["kind"]) == len(z["measured_start"]) == len(z["simulated_start"])
        assert z["deps_count"].sum() == len(z["deps"])
