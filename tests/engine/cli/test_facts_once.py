"""Graph facts are computed once per (graph, order) in a default run of the command line."""
from collections import Counter

import planner.facts as facts_module
from engine.train import main


def test_size_demand_is_computed_once_per_graph_and_order(monkeypatch, tmp_path):
    calls = Counter()
    real = facts_module.size_demand

    def counting(g, order, lt=None):
        calls[(id(g), tuple(order))] += 1
        return real(g, order, lt)

    monkeypatch.setattr(facts_module, "size_demand", counting)
    # The default run (small-cnn, the three policies, a search, training, the bit-for-bit check),
    # shortened: one worker so that every call happens in this process, a short search.
    assert main(["--quiet", "--backend", "cpu", "--iterations", "2", "--measure-iterations", "1",
                 "--search-generations", "1", "--population", "6", "--workers", "1",
                 "--out", str(tmp_path)]) == 0
    assert calls and max(calls.values()) == 1, calls
    assert len(calls) == 1          # every policy and the search plan from the default order's facts
