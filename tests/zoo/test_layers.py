from engine.ir import Graph, Kind
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
