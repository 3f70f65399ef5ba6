"""A graph outside the process: as JSON-able data (``graph_to_dict`` / ``graph_from_dict``),
and as a short structural ``fingerprint`` (so that a plan or profile made for one graph is
not applied to another)."""
from __future__ import annotations

import hashlib
import json
import weakref

from ops import registry as op_registry
from ops.registry import OpError

from .graph_check import validate
from .ir import Graph, GraphError, Kind

FORMAT = "swapengine.graph/1"

# Graph -> (its size when hashed, fingerprint). Graphs only grow, so the size (node, tensor
# and state-pair counts, loss) tells whether a cached fingerprint is still current.
_fingerprints: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def graph_to_dict(g: Graph) -> dict:
    def jsonable(v):
        if isinstance(v, tuple):
            return [jsonable(x) for x in v]
        return v

    return {
        "format": FORMAT,
        "name": g.name,
        "tensors": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype.name,
                     "kind": t.kind.name.lower(), "init": t.init} for t in g.tensors],
        "nodes": [{"name": n.name, "op": n.op, "attrs": {k: jsonable(v) for k, v in n.attrs.items()},
                   "inputs": list(n.inputs), "outputs": list(n.outputs)} for n in g.nodes],
        "state_pairs": [list(p) for p in g.state_pairs],
        "loss": g.loss,
        "outputs": list(g.outputs),
    }


def graph_from_dict(d: dict) -> Graph:
    """Rebuild a graph from ``graph_to_dict`` output and validate it (GraphError if malformed)."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise GraphError(f"not a swapengine graph (expected format '{FORMAT}')")
    g = Graph(d.get("name", "graph"))
    try:
        for t in d["tensors"]:
            g.restore_tensor(t["name"], t["shape"], t["dtype"], Kind[t["kind"].upper()], t.get("init"))
        for n in d["nodes"]:
            try:
                attrs = op_registry.get(n["op"]).canon(dict(n["attrs"]))
            except OpError as e:
                raise GraphError(f"node '{n['name']}' ({n['op']}): {e}") from None
            g.restore_node(n["name"], n["op"], attrs, n["inputs"], n["outputs"])
        g.state_pairs = [(int(a), int(b)) for a, b in d.get("state_pairs", [])]
        g.loss = d.get("loss")
        g.outputs = [int(t) for t in d.get("outputs", [])]
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, GraphError):
            raise
        raise GraphError(f"malformed graph description: {e!r}") from None
    validate(g)
    return g


def fingerprint(g: Graph) -> str:
    """A short hash of the structure (operators, attributes, edges, shapes, dtypes, kinds),
    names left out. Cached per graph while it does not grow."""
    size = (len(g.nodes), len(g.tensors), len(g.state_pairs), g.loss)
    cached = _fingerprints.get(g)
    if cached is not None and cached[0] == size:
        return cached[1]
    d = graph_to_dict(g)
    for t in d["tensors"]:
        del t["name"]
    for n in d["nodes"]:
        del n["name"]
    del d["name"]
    digest = hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]
    _fingerprints[g] = (size, digest)
    return digest
