"""zoo/gpt.py: the GPT decoder, its presets, its training and its plans under a budget."""
import numpy as np
import pytest

import zoo
from engine.autodiff import Adam, SGD
from engine.cli.run import main
from engine.ir import Kind
from engine.liveness import peak_bytes
from engine.training import Trainer
from planner.facts import GraphFacts
from planner.policy import plan_with
from planner.verify import verify
from zoo.gpt import parameter_count, preset

from .helpers import differs_from_unlimited, ops_by_name, parameter_count as counted

# Parameters of the GPT-2 checkpoints OpenAI published (tied head), and a Llama-7B-sized one.
PUBLISHED = {"gpt2-small": 124_439_808, "gpt2-medium": 354_823_168, "gpt2-large": 774_030_080,
             "gpt2-xl": 1_557_611_200}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_gpt2_presets_have_the_published_parameter_counts(name):
    g = zoo.build(name, batch=1, size=8)        # a short sequence: only the position table shrinks
    assert parameter_count(**{**preset(name), "seq": 8}) == counted(g)
    assert parameter_count(**preset(name)) == PUBLISHED[name]


def test_the_7b_preset_is_7b_class_and_every_preset_trains_with_adamw():
    assert 6.5e9 < parameter_count(**preset("gpt-7b")) < 7e9
    assert all(zoo.default_optimizer(n) == "adamw" for n in zoo.GPT_PRESETS)
    assert zoo.default_optimizer("rnn-1-1k") == "sgd"


def test_graph_layout_and_optimizer_state():
    g = zoo.tiny("gpt")
    ops = ops_by_name(g)
    layers = zoo.TINY["gpt"]["layers"]
    assert ops["softmax"] == ops["gelu"] == layers and ops["layer_norm"] == 2 * layers + 1
    assert ops["batch_matmul"] == 2 * layers * 3            # scores and context, each with two gradients
    assert ops["adam_update"] == len(g.leaves(Kind.PARAMETER))
    params = sum(g.tensors[t].nbytes for t in g.leaves(Kind.PARAMETER))
    state = sum(g.tensors[t].nbytes for t in g.leaves(Kind.STATE))
    assert state == 2 * params + len(g.leaves(Kind.PARAMETER)) * 4     # m and v, and a step count each
    sgd = zoo.build("gpt-1-16-2", batch=2, size=4, vocab=7, optimizer=SGD())
    assert "sgd_update" in ops_by_name(sgd) and "adam_update" not in ops_by_name(sgd)


def test_bad_configurations_fail_in_one_line():
    with pytest.raises(ValueError, match="width 16 is not a multiple of heads 3"):
        zoo.build("gpt-1-16-3", batch=1, size=4)
    with pytest.raises(ValueError, match="valid forms.*gpt2-small"):
        zoo.build("gpt2-huge")
    with pytest.raises(ValueError, match="no option depth"):
        zoo.build("gpt-tiny", depth=3)


def test_the_loss_falls_on_teacher_data():
    tr = Trainer(zoo.build("gpt-tiny"), seed=0)
    losses = [tr.step() for _ in range(50)]
    first, last = np.mean(losses[:10]), np.mean(losses[40:])
    assert last < 0.8 * first, (first, last)


@pytest.mark.parametrize("policy", ["swapadvisor", "odswap"])
def test_bit_identical_under_a_budget_with_the_sanitizer(policy):
    g = zoo.build("gpt-tiny", batch=4)
    facts = GraphFacts(g)
    for i, budget in enumerate((max(facts.smallest_budget, int(0.3 * peak_bytes(g))), facts.smallest_budget)):
        program = plan_with(policy, g, budget)
        verify(program, g, budget)
        assert program.bytes_moved(g, 1) > 0                 # it swaps
        bad = differs_from_unlimited(g, program, backend_seed=i)
        assert not bad, f"{policy} at {budget} bytes: {bad[:3]} differ"


def test_engine_train_runs_gpt_tiny_with_every_policy(tmp_path, capsys):
    assert main(["--model", "gpt-tiny", "--backend", "cpu", "--sanitize", "--iterations", "2",
                 "--measure-iterations", "1", "--policy", "reference,ideal,odswap,swapadvisor",
                 "--search-seconds", "0", "--quiet", "--out", str(tmp_path)]) == 0
    assert "parameters identical to the unlimited run: yes" in capsys.readouterr().out


def test_engine_train_simulates_gpt2_at_scale(tmp_path, capsys):
    assert main(["--model", "gpt2-small", "--batch", "2", "--size", "256", "--simulate-only", "--profile", "h100",
                 "--memory", "2GiB", "--search-seconds", "0", "--quiet", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "swapadvisor" in out and "x bound" in out


@pytest.mark.parametrize("typed, kept", [("gpt-tiny", "gpt-tiny"), ("GPT2-Small", "gpt2-small"), ("gpt-2-32-4", "gpt-2-32-4")])
def test_a_gpt_keeps_the_name_it_was_asked_by(typed, kept):
    """Reports and runs/ folders say the name the user typed, not the builder's gpt-LxW."""
    assert zoo.build(typed, batch=1, size=8).name == kept
