from engine.ir import Graph, Kind
from engine.library.models import model_graph
from engine.recompute import recomputable
from zoo.layers import conv, conv_bn, cross_entropy, image_classifier_head, widen


def test_blocks_scope_their_parameters_and_infer_shapes():
    g = Graph()
    x = g.input("x", (2, 3, 8, 8))
    y = conv_bn(g, x, 6, 3, stride=2, name="stem")
    assert g.shape(y) == (2, 6, 4, 4)
    names = {g.tensors[t].name for t in g.leaves(Kind.PARAMETER, Kind.STATE)}
    assert names == {"stem/conv/w", "stem/bn/gamma", "stem/bn/beta", "stem/bn/running_mean",
                     "stem/bn/running_var"}
    z = conv(g, y, 6, (1, 7), groups=6, name="depthwise")
    assert g.shape(z) == (2, 6, 4, 4) and g.tensors[g.tensor_id("depthwise/w")].shape == (6, 1, 1, 7)
    loss = cross_entropy(g, image_classifier_head(g, z, 5))
    assert g.shape(loss) == () and g.leaves(Kind.LABEL)


def test_widen_never_reaches_zero():
    assert widen(64, 10) == 640 and widen(3, 0.1) == 1


def test_training_batch_norm_is_split_so_relu_outputs_can_be_recomputed():
    """A training graph's batch norm is batch_norm_stats (stateful) then batch_norm_apply (pure):
    relu(bn_y) can be recreated from the conv output through recomputable nodes alone."""
    g = model_graph("small-cnn")
    assert not any(n.op == "batch_norm" for n in g.nodes)
    applies = [n for n in g.nodes if n.op == "batch_norm_apply"]
    assert applies and all(recomputable(n) for n in applies)
    for n in applies:
        stats = g.nodes[g.producer[n.inputs[3]]]
        # the apply's gradient is batch norm's only with the statistics of its own x
        assert stats.op == "batch_norm_stats" and not recomputable(stats)
        assert stats.inputs[0] == n.inputs[0] and stats.outputs[:2] == n.inputs[3:]
        assert n.name == stats.name.replace("/stats", "/apply")
    relus = [g.nodes[u] for n in applies for u in g.users[n.outputs[0]] if g.nodes[u].op == "relu"]
    assert relus and all(recomputable(r) for r in relus)


def test_inference_batch_norm_stays_fused_and_in_place():
    g = Graph()
    x = g.input("x", (2, 3, 8, 8))
    conv_bn(g, x, 6, 3, name="stem", in_place=True)
    assert [n.op for n in g.nodes] == ["conv2d", "batch_norm", "relu"]
    assert g.nodes[1].attrs.get("in_place") is True
