"""A policy from outside the planner, registered in this test module, runs through
`engine.train --policy` end to end: planned, verified against the budget, simulated, executed
on the cpu backend with the sanitizer, and trained to parameters bit-identical to the
unlimited-memory run. Nothing outside planner/ had to learn its name."""
import json

import numpy as np
import pytest

from allocator import aligned_bytes
from engine.graph_io import fingerprint
from engine.program import COMPUTE, SWAP_IN, SWAP_OUT, Arena, Instr, Program
from engine.train import main
from planner import policy
from planner.errors import PlanError

TINY_LSTM = ["--model", "small-lstm", "--batch", "4", "--size", "3", "--quiet", "--backend", "cpu"]


def everything_out(request: policy.PlanRequest) -> Program:
    """Swap every tensor out after each use, and in before each: only the running operator's
    tensors are ever resident. Objects: per tensor size, as many as one operator uses at once."""
    g, order = request.graph, request.facts.order
    nbytes = [t.nbytes for t in g.tensors]
    sizes = sorted(set(nbytes))
    need = {s: 0 for s in sizes}
    for n in g.nodes:
        used = list(dict.fromkeys(n.inputs + n.outputs))
        for s in sizes:
            need[s] = max(need[s], sum(1 for t in used if nbytes[t] == s))
    offsets, sizes_of, first = [], [], {}
    at = 0
    for s in sizes:
        first[s] = len(offsets)
        for _ in range(need[s]):
            offsets.append(at)
            sizes_of.append(int(aligned_bytes(s)))
            at += int(aligned_bytes(s))
    scratch = request.budget.scratch_bytes
    if at + scratch > request.budget.device_bytes:
        raise PlanError(f"everything-out needs {at + scratch} bytes")
    instrs: list[Instr] = []
    touched = [[] for _ in offsets]         # per object: instructions since (and with) its last write
    host_writer: dict[int, int] = {}        # tensor -> the swap-out that wrote its host copy

    def emit(ins: Instr, writes: list[int], reads: list[int]) -> int:
        i = len(instrs)
        ins.deps = sorted({d for o in writes for d in touched[o]} | set(ins.deps))
        instrs.append(ins)
        for o in writes:
            touched[o] = [i]
        for o in reads:
            touched[o].append(i)
        return i

    for nid in order:
        n = g.nodes[nid]
        taken = {s: 0 for s in sizes}
        where = {}
        for t in dict.fromkeys(n.inputs + n.outputs):
            s = nbytes[t]
            where[t] = first[s] + taken[s]
            taken[s] += 1
        arrived = [emit(Instr(SWAP_IN, t, where[t], deps=[host_writer[t]] if t in host_writer else []),
                        [where[t]], []) for t in dict.fromkeys(n.inputs)]
        ins_objs = [where[t] for t in n.inputs]
        outs = [where[t] for t in n.outputs]
        done = emit(Instr(COMPUTE, nid, objects=tuple(ins_objs + outs), deps=arrived), outs, ins_objs)
        for t in dict.fromkeys(n.outputs):
            host_writer[t] = emit(Instr(SWAP_OUT, t, where[t], copy=True, deps=[done]), [], [where[t]])
    arena = Arena(np.array(offsets, np.int64), np.array(sizes_of, np.int64), at + scratch, scratch,
                  {"name": "one object per concurrent tensor"})
    return Program(g.name, list(order), arena, instrs, {}, "everything-out", fingerprint(g))


@pytest.fixture
def toy_policy():
    policy.register(policy.Policy("everything-out", "swap every tensor out after each use (a test policy)",
                                  everything_out))
    yield
    policy.unregister("everything-out")


def test_a_registered_policy_trains_bit_identically_through_the_command_line(toy_policy, tmp_path, capsys):
    report = tmp_path / "r.json"
    assert main(TINY_LSTM + ["--policy", "ideal,everything-out", "--memory", "4MiB", "--iterations", "3",
                             "--measure-iterations", "1", "--sanitize", "--profile", "v100",
                             "--json", str(report), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "plan   everything-out" in out and "verified" in out
    assert "parameters identical to the unlimited run: yes (bit for bit)" in out
    r = json.loads(report.read_text())
    assert r["identical"] is True
    row = next(p for p in r["policies"] if p["policy"] == "everything-out")
    assert row["h2d_bytes"] > 0 and row["d2h_bytes"] > 0        # it really swapped


def test_an_unregistered_policy_is_one_line(capsys):
    assert main(TINY_LSTM + ["--policy", "everything-out"]) == 2
    err = capsys.readouterr().err
    assert "unknown policy 'everything-out'" in err and "\n" not in err.strip()
