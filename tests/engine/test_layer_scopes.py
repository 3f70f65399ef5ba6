"""engine/layer_scopes.py: a decoder's layers read from its node names, forward, backward and
updates alike; what lies outside the blocks belongs to none."""
import zoo
from engine.ir import Kind
from engine.layer_scopes import layer_of_nodes, layer_scope


def test_every_node_of_a_block_and_its_gradient_and_update_is_in_its_layer():
    for model in ("gpt-2-16-2", "llama-2-16-2"):
        g = zoo.build(model, batch=2, size=4)
        layer = layer_of_nodes(g)
        assert set(layer.tolist()) == {-1, 0, 1}
        for n in g.nodes:
            if n.name.startswith(layer_scope(1) + "/"):
                assert layer[n.id] == 1
        kinds = {(int(layer[n.id]), g.tensors[n.outputs[0]].kind) for n in g.nodes}
        assert {(1, Kind.ACTIVATION), (1, Kind.GRADIENT), (1, Kind.PARAMETER)} <= kinds   # forward, backward, update
        assert layer[g.node_id("loss")] == -1 and layer[g.node_id("token_embedding")] == -1


def test_a_model_without_blocks_has_no_layers():
    assert (layer_of_nodes(zoo.tiny("rnn")) == -1).all()
