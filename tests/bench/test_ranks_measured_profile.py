"""bench.ranks_measured's profile measured as the ranks train: from one step's instruction
timings it recovers the operator seconds, the link and the network latency they were made
with (no Ray: the timings are written here as a rank's backend would record them)."""
from dataclasses import replace

import pytest

from bench.ranks_measured import profile_as_trained
from engine.library.ranks import RankSpec, plan_ranks, whole_graph
from engine.profile import Network, analytic_profile
from engine.program import ALLREDUCE, COMPUTE, SWAP_IN, SWAP_OUT

LATENCY, RATE_IN, RATE_OUT, HOP = 150e-6, 1.5e9, 1.2e9, 900e-6


def test_the_fit_recovers_what_the_timings_were_made_with():
    spec = RankSpec("small-cnn", 16, 2, size=16, in_program=True)
    (program,) = plan_ranks(spec).programs
    g = whole_graph(spec)
    network = Network(bytes_per_s=2e9, latency_s=200e-6)
    apart = replace(analytic_profile("v100"), network=network)
    step, clock = [], 0.0
    for ins in program.instrs:
        if ins.kind == COMPUTE:
            what, seconds = ins.target, 1e-4 * (1 + ins.target % 7)
        elif ins.kind in (SWAP_IN, SWAP_OUT):
            what = g.tensors[ins.target].nbytes
            seconds = LATENCY + what / (RATE_IN if ins.kind == SWAP_IN else RATE_OUT)
        elif ins.kind == ALLREDUCE:
            nbytes = sum(g.tensors[t].nbytes for t in ins.bucket)
            what, seconds = -1, network.ring_seconds(nbytes, 2) - 2 * network.latency_s + 2 * HOP
        else:
            continue
        step.append((ins.kind, what, clock, clock + seconds))
        clock += seconds
    assert {k for k, *_ in step} >= {COMPUTE, SWAP_IN, SWAP_OUT, ALLREDUCE}
    measured, seconds = profile_as_trained(apart, program, g, [step, step], 2)
    for ins in program.instrs:
        if ins.kind == COMPUTE:
            assert seconds[ins.target] == pytest.approx(1e-4 * (1 + ins.target % 7))
    assert measured.link.latency_s == pytest.approx(LATENCY, rel=1e-6)
    assert measured.link.h2d_bytes_per_s == pytest.approx(RATE_IN, rel=1e-6)
    assert measured.link.d2h_bytes_per_s == pytest.approx(RATE_OUT, rel=1e-6)
    assert measured.network.bytes_per_s == network.bytes_per_s
    assert measured.network.latency_s == pytest.approx(HOP, rel=1e-6)
