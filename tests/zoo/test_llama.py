"""zoo/llama.py: Llama 2's blocks, its presets, its training, and training under a budget that
forces copies, bit for bit as the unlimited run."""
import numpy as np
import pytest

import zoo
from engine.initializers import initial_value
from engine.ir import GraphError, Kind
from engine.liveness import peak_bytes
from engine.program import SWAP_OUT
from engine.training import Trainer
from planner.facts import GraphFacts
from planner.policy import plan_with
from planner.verify import verify
from zoo.llama import mlp_width, parameter_count, preset

from .helpers import differs_from_unlimited, ops_by_name, parameter_count as counted


def test_llama2_7b_has_its_published_parameter_count():
    assert mlp_width(4096) == 11008                   # Llama 2's rounding rule
    assert parameter_count(**preset("llama2-7b")) == 6_738_415_616
    g = zoo.build("llama2-7b", batch=1, size=8)       # parameters do not depend on the sequence
    assert counted(g) == 6_738_415_616
    assert zoo.default_optimizer("llama2-7b") == zoo.default_optimizer("llama-2-64-4") == "adamw"


def test_graph_layout():
    g = zoo.build("llama-3-32-4", batch=2, size=8, vocab=16)
    ops = ops_by_name(g)
    forward = [n.op for n in g.nodes if g.tensors[n.outputs[0]].kind == Kind.ACTIVATION]
    assert ops["rms_norm"] == 2 * 3 + 1 and ops["softmax"] == 3
    assert ops["fully_connected"] == 7 * 3 + 1            # q, k, v, o, gate, up, down; the head
    assert forward.count("split") == forward.count("concat") == 2 * 3     # rotate_half of q and k
    assert counted(g) == parameter_count(layers=3, width=32, vocab=16)
    assert g.name == "llama-3-32-4"
    tables = [t for t in g.leaves(Kind.STATE) if g.tensors[t].name.startswith("rope_")]
    assert [g.shape(t) for t in tables] == [(8, 8), (8, 8)]
    nexts = dict(g.state_pairs)
    assert all(nexts[t] == t for t in tables)             # nothing updates them: buffers


def test_rotary_tables_turn_each_pair_by_its_frequency():
    cos = initial_value("c", "rope_cos:10000", (5, 4), "float64", 0)
    sin = initial_value("s", "rope_sin:10000", (5, 4), "float64", 0)
    p = np.arange(5)[:, None]
    angles = p * np.array([1.0, 0.01, 1.0, 0.01])         # theta ** (-2j/d) for j = 0, 1, both halves
    assert np.allclose(cos, np.cos(angles)) and np.allclose(sin, np.sin(angles))
    with pytest.raises(GraphError, match="even width"):
        initial_value("c", "rope_cos:10000", (5, 3), "float64", 0)


def test_bad_configurations_fail_in_one_line():
    with pytest.raises(ValueError, match="multiple of heads 3"):
        zoo.build("llama-1-16-3", batch=1, size=4)
    with pytest.raises(ValueError, match="valid forms.*llama2-7b"):
        zoo.build("llama3-8b")
    with pytest.raises(ValueError, match="positive"):
        zoo.build("llama-0-16-2")


def test_the_loss_falls_on_teacher_data():
    tr = Trainer(zoo.build("llama-tiny"), seed=0)
    losses = [tr.step() for _ in range(50)]
    assert np.mean(losses[40:]) < 0.8 * np.mean(losses[:10])


@pytest.mark.parametrize("policy", ["swapadvisor", "smartswap"])      # full_recompute: tests/planner
def test_bit_identical_under_a_budget_that_forces_copies(policy):
    g = zoo.build("llama-tiny", batch=4)
    budget = max(GraphFacts(g).smallest_budget, int(0.5 * peak_bytes(g)))
    program = plan_with(policy, g, budget)
    verify(program, g, budget)
    assert program.bytes_moved(g, SWAP_OUT) > 0                           # it swaps
    bad = differs_from_unlimited(g, program, backend_seed=1)
    assert not bad, f"{policy} at {budget} bytes: {bad[:3]} differ"
