import json

import pytest

from engine import graph_io
from engine.graph_io import fingerprint, graph_from_dict, graph_to_dict
from engine.ir import GraphError

from .test_ir import small_graph


def test_json_round_trip():
    g, *_ = small_graph()
    d = json.loads(json.dumps(graph_to_dict(g)))
    h = graph_from_dict(d)
    assert h.dump() == g.dump()


def test_malformed_description():
    with pytest.raises(GraphError, match="not a swapengine graph"):
        graph_from_dict({"tensors": []})
    with pytest.raises(GraphError, match="malformed"):
        graph_from_dict({"format": "swapengine.graph/1", "tensors": [{"name": "x"}], "nodes": []})


def test_fingerprint_follows_structure_not_names():
    g, *_ = small_graph()
    h = graph_from_dict(graph_to_dict(g))
    assert fingerprint(g) == fingerprint(h)
    x = g.input("extra", (1,))
    g.apply("relu", [x])
    assert fingerprint(g) != fingerprint(h)


def test_fingerprint_is_cached_until_the_graph_grows(monkeypatch):
    g, *_ = small_graph()
    first = fingerprint(g)
    calls = []
    monkeypatch.setattr(graph_io, "graph_to_dict", lambda g: calls.append(g) or graph_to_dict(g))
    assert fingerprint(g) == first and not calls
    g.input("extra", (1,))
    assert fingerprint(g) != first and len(calls) == 1
