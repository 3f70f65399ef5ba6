"""zoo/__init__.py: model names, defaults, errors and tiny configurations."""
import pytest

import zoo
from engine.autodiff import SGD
from engine.graph_check import validate
from engine.ir import Kind


@pytest.mark.parametrize("name, family, args", [
    ("wresnet-152-10", "wresnet", {"depth": 152, "width": 10.0}),
    ("WResNet-50-2.5", "wresnet", {"depth": 50, "width": 2.5}),
    ("inception-4", "inception", {"width": 4.0}),
    ("nasnet-25", "nasnet", {"cells": 25}),
    ("rnn-8-8k", "rnn", {"layers": 8, "hidden": 8192}),
    ("BRNN-4-8K", "brnn", {"layers": 4, "hidden": 8192}),
    ("rnn-2-0.5k", "rnn", {"layers": 2, "hidden": 512}),
    (" resnet-50 ", "resnet", {"depth": 50}),
])
def test_names_parse_case_insensitively(name, family, args):
    fam, parsed = zoo.parse(name)
    assert fam is zoo.FAMILIES[family] and parsed == args


@pytest.mark.parametrize("name", ["vgg-16", "wresnet-152", "rnn-8-8", "nasnet", "inception-x", "", "resnet-50-2"])
def test_unknown_or_malformed_names_fail_in_one_line_listing_valid_forms(name):
    with pytest.raises(ValueError) as e:
        zoo.build(name)
    msg = str(e.value)
    assert "\n" not in msg and "valid forms" in msg and "wresnet-D-X" in msg and "rnn-L-XK" in msg


def test_bad_depth_and_options_fail_in_one_line():
    with pytest.raises(ValueError, match="depth 60"):
        zoo.build("wresnet-60-1", batch=1)
    with pytest.raises(ValueError, match="no option colour"):
        zoo.build("rnn-1-1k", colour="red")
    with pytest.raises(ValueError, match="positive"):
        zoo.build("resnet-50", batch=0)
    with pytest.raises(ValueError, match="must be positive"):
        zoo.build("rnn-0-8k")
    with pytest.raises(ValueError, match="must be positive"):
        zoo.build("wresnet-50-0")
    with pytest.raises(ValueError, match="fewer than 2 values"):   # images too small for the depth
        zoo.build("wresnet-50-1", batch=1, size=16)
    with pytest.raises(ValueError, match="no tiny configuration"):
        zoo.tiny("vgg")


def test_batch_and_size_default_to_the_papers_and_can_be_overridden():
    g = zoo.build("wresnet-14-1")
    assert g.shape(g.leaves(Kind.INPUT)[0]) == (64, 3, 224, 224)
    g = zoo.build("wresnet-14-1", batch=2, size=32)
    assert g.shape(g.leaves(Kind.INPUT)[0]) == (2, 3, 32, 32)
    g = zoo.build("rnn-1-0.25k", size=7)
    assert len(g.leaves(Kind.INPUT)) == 7 and g.shape(g.leaves(Kind.INPUT)[0]) == (256, 256)
    b = zoo.build("brnn-1-0.25k", size=3)
    assert b.shape(b.leaves(Kind.INPUT)[0])[0] == 128


def test_training_models_carry_the_optimizer_and_inference_models_ignore_it():
    g = zoo.build("rnn-1-0.25k", batch=2, size=2, sgd=SGD(lr=0.5, momentum=0.0))
    updates = [n for n in g.nodes if n.op == "sgd_update"]
    assert updates and all(n.attrs["lr"] == 0.5 and n.attrs["momentum"] == 0.0 for n in updates)
    g = zoo.build("resnet-50", batch=1, size=64, sgd=SGD())
    assert g.loss is None and not any(n.op == "sgd_update" for n in g.nodes)


def test_dtype_reaches_every_float_tensor():
    g = zoo.build("wresnet-14-1", batch=2, size=32, dtype="float64")
    floats = {t.dtype.name for t in g.tensors if t.dtype.kind == "f"}
    assert floats == {"float64"}


@pytest.mark.parametrize("family", sorted(zoo.TINY))
def test_every_family_has_a_tiny_configuration(family):
    g = zoo.tiny(family)
    validate(g)
    assert (g.loss is None) == (not zoo.FAMILIES[family].training)
