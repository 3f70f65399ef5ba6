"""zoo/deeplab.py: DeepLabv3+ (ResNet-101, output stride 16), paper 001's Figure 4 and 5 model."""
import importlib.util

import pytest

import zoo
from engine.ir import Kind
from zoo.deeplab import deeplabv3plus

from .helpers import ops_by_name, parameter_count, train_once
from .segmentation_checks import trains_bit_identically_while_swapping

# torchvision's deeplabv3_resnet101 (21 classes, aux_loss=True): 60,996,202 parameters, its
# num_params. Its ResNet-101 backbone and ASPP are DeepLabv3+'s; what differs is the head after
# the ASPP: torchvision's 3x3 conv (256) + BN + 1x1 classifier (595,733) and an auxiliary FCN head on
# stage 3 (2,365,205), where DeepLabv3+ has the decoder below.
TORCHVISION_DEEPLABV3_RESNET101 = 60_996_202
TORCHVISION_HEAD_AND_AUX = 595_733 + 2_365_205
DECODER = (256 * 48 + 2 * 48) + (304 * 256 * 9 + 2 * 256) + (256 * 256 * 9 + 2 * 256) + (256 * 21 + 21)


def test_tiny_model_trains_one_iteration():
    train_once(zoo.tiny("deeplabv3plus"))


def test_backbone_and_aspp_have_torchvision_s_parameters():
    g = zoo.build("deeplabv3plus", batch=2)
    assert parameter_count(g) == TORCHVISION_DEEPLABV3_RESNET101 - TORCHVISION_HEAD_AND_AUX + DECODER


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None, reason="torchvision is not installed")
def test_the_published_count_is_torchvision_s():
    from torchvision.models.segmentation import deeplabv3_resnet101
    m = deeplabv3_resnet101(weights=None, weights_backbone=None, num_classes=21, aux_loss=True)

    def count(module):
        return sum(p.numel() for p in module.parameters())
    assert count(m) == TORCHVISION_DEEPLABV3_RESNET101
    assert count(m) - count(m.backbone) - count(m.classifier[0]) == TORCHVISION_HEAD_AND_AUX


def test_513_crops_at_output_stride_16():
    g = zoo.build("deeplabv3plus", batch=2)
    assert g.shape(g.leaves(Kind.INPUT)[0]) == (2, 3, 513, 513)
    dilated = {n.attrs["dilation"] for n in g.nodes if n.op == "conv2d" and "dilation" in n.attrs}
    assert dilated == {(2, 2), (4, 4), (8, 8), (6, 6), (12, 12), (18, 18)}   # multi-grid, then ASPP
    sizes = [(g.shape(n.inputs[0])[2:], n.attrs["size"]) for n in g.nodes if n.op == "upsample_bilinear2d"]
    assert sizes == [((1, 1), (33, 33)), ((33, 33), (129, 129)), ((129, 129), (513, 513))]
    assert ops_by_name(g)["softmax_cross_entropy"] == 1
    assert g.shape(g.leaves(Kind.LABEL)[0]) == (2, 513, 513)


def test_bad_blocks_are_one_line():
    with pytest.raises(ValueError, match="blocks must be four positive counts"):
        deeplabv3plus(blocks=(3, 4, 23))
    with pytest.raises(ValueError, match="batch must be at least 2"):
        deeplabv3plus(batch=1)


def test_trains_bit_identically_while_swapping():
    assert trains_bit_identically_while_swapping(zoo.tiny("deeplabv3plus")) > 0
