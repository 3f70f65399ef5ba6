"""Model builders, by name: ``build("wresnet-152-10", batch=64)`` returns a Graph.

Names (case-insensitive), as the paper writes them (Section 6.1):

- ``wresnet-D-X``  bottleneck ResNet of depth D (50, 101, 152, 200 or 12k+2), X times wider
- ``inception-X``  Inception-V4, X times wider
- ``nasnet-R``     NASNet-A (large layout) with R normal cells per stage
- ``rnn-L-XK``     L LSTM layers of hidden size X*1024
- ``brnn-L-XK``    L bidirectional LSTM layers of hidden size X*1024
- ``resnet-D``     forward-only ResNet of depth D, for inference
- ``densenet-D``   DenseNet-BC of depth D (121, 169, 201, 161; paper 001's Figures 4 and 5)
- ``pix2pixhd``    Pix2PixHD's global generator on size x 2*size Cityscapes images (001's Figures 4 and 5)
- ``deeplabv3plus`` DeepLabv3+ with a ResNet-101 backbone, output stride 16 (001's Figures 4 and 5)
- ``gpt-tiny``, ``gpt2-small|medium|large|xl``, ``gpt-7b``  GPT decoders (zoo/gpt.py presets)
- ``gpt-L-W-H``    a GPT of L blocks of width W with H heads (GPT-2's vocabulary, 1024 tokens)
- ``llama-tiny``, ``llama2-7b``  Llama 2 decoders (zoo/llama.py presets)
- ``llama-L-W-H``  a Llama 2 of L blocks of width W with H heads (its vocabulary, 4096 tokens)

Training models are a whole iteration: forward, backward and the optimizer's update
(``optimizer``: an engine.autodiff SGD or Adam; each family has a default, ``Family.optimizer``).
``size`` is the image side for CNNs and the sequence length for RNNs, GPTs and Llamas. Builder
modules are imported on first use, so importing ``zoo`` (or ``zoo.small``) is cheap.
"""
from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass
from typing import Callable

from engine.ir import Graph

VALID_FORMS = "wresnet-D-X (e.g. wresnet-152-10), inception-X, nasnet-R, rnn-L-XK (e.g. rnn-8-8k), " \
              "brnn-L-XK, resnet-D, densenet-D, pix2pixhd, deeplabv3plus, gpt-tiny, gpt2-small|medium|large|xl, " \
              "gpt-7b, gpt-L-W-H, llama-tiny, llama2-7b, llama-L-W-H"
GPT_PRESETS = ("gpt-tiny", "gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl", "gpt-7b")
LLAMA_PRESETS = ("llama-tiny", "llama2-7b")
NUMBER = r"(\d+(?:\.\d+)?)"


@dataclass(frozen=True)
class Family:
    pattern: str
    module: str
    builder: str
    size_option: str         # the builder's argument that ``size`` sets
    args: Callable[[re.Match], dict]
    training: bool = True
    optimizer: str = "sgd"   # the optimizer it trains with unless told otherwise (sgd, adam, adamw)


def _decoder_args(module: str) -> Callable[[re.Match], dict]:
    """A decoder family's arguments: a preset's (group 1) or layers, width and heads (groups 2-4)."""
    def args(m: re.Match) -> dict:
        if m[1]:
            return importlib.import_module(module).preset(m[1])     # the table lives with the builder
        return {"layers": int(m[2]), "width": int(m[3]), "heads": int(m[4])}
    return args


FAMILIES = {
    "wresnet": Family(rf"wresnet-(\d+)-{NUMBER}", "zoo.wresnet", "wresnet", "size",
                      lambda m: {"depth": int(m[1]), "width": float(m[2])}),
    "inception": Family(rf"inception-{NUMBER}", "zoo.inception", "inception", "size",
                        lambda m: {"width": float(m[1])}),
    "nasnet": Family(r"nasnet-(\d+)", "zoo.nasnet", "nasnet", "size",
                     lambda m: {"cells": int(m[1])}),
    "rnn": Family(rf"rnn-(\d+)-{NUMBER}k", "zoo.rnn", "rnn", "steps",
                  lambda m: {"layers": int(m[1]), "hidden": round(float(m[2]) * 1024)}),
    "brnn": Family(rf"brnn-(\d+)-{NUMBER}k", "zoo.rnn", "brnn", "steps",
                   lambda m: {"layers": int(m[1]), "hidden": round(float(m[2]) * 1024)}),
    "resnet": Family(r"resnet-(\d+)", "zoo.resnet", "resnet", "size",
                     lambda m: {"depth": int(m[1])}, training=False),
    "densenet": Family(r"densenet-(\d+)", "zoo.densenet", "densenet", "size",
                       lambda m: {"depth": int(m[1])}),
    "pix2pixhd": Family(r"pix2pixhd", "zoo.pix2pixhd", "pix2pixhd", "size", lambda m: {}),
    "deeplabv3plus": Family(r"deeplabv3plus", "zoo.deeplab", "deeplabv3plus", "size", lambda m: {}),
    "gpt": Family(rf"({'|'.join(GPT_PRESETS)})|gpt-(\d+)-(\d+)-(\d+)", "zoo.gpt", "gpt", "seq",
                  _decoder_args("zoo.gpt"), optimizer="adamw"),
    "llama": Family(rf"({'|'.join(LLAMA_PRESETS)})|llama-(\d+)-(\d+)-(\d+)", "zoo.llama", "llama", "seq",
                    _decoder_args("zoo.llama"), optimizer="adamw"),
}

# Small configurations that run one iteration on the numpy reference interpreter in about a second.
TINY = {
    "wresnet": dict(blocks=(1, 1, 1, 1), width=1, base_width=4, batch=2, size=32, classes=10),
    "inception": dict(width=1 / 16, blocks=(1, 1, 1), batch=2, size=75, classes=10),
    "nasnet": dict(cells=1, filters=8, stem_filters=8, batch=2, size=32, classes=10),
    "rnn": dict(layers=2, hidden=16, batch=4, steps=8, classes=7),
    "brnn": dict(layers=2, hidden=16, batch=4, steps=5, classes=7),
    "resnet": dict(blocks=(1, 1, 1, 1), base_width=4, batch=2, size=32, classes=10),
    "densenet": dict(blocks=(2, 2), growth=4, batch=2, size=32, classes=10),
    "pix2pixhd": dict(ngf=4, downsamples=2, blocks=1, in_channels=3, batch=2, size=8),
    "deeplabv3plus": dict(blocks=(1, 1, 1, 1), base_width=4, aspp_channels=8, low_channels=4, classes=3, batch=2,
                          size=33),
    "gpt": dict(layers=2, width=16, heads=2, seq=6, vocab=11, batch=2),
    "llama": dict(layers=2, width=16, heads=2, seq=6, vocab=11, batch=2),
}


def parse(model: str) -> tuple[Family, dict]:
    """The family of a model name and the builder arguments its name fixes; ValueError if malformed."""
    name = str(model).strip().lower()
    for family in FAMILIES.values():
        m = re.fullmatch(family.pattern, name)
        if m:
            args = family.args(m)
            if any(v <= 0 for v in args.values()):
                raise ValueError(f"model '{model}': the numbers in its name must be positive")
            return family, args
    raise ValueError(f"unknown model '{model}'; valid forms: {VALID_FORMS}")


def _builder(family: Family) -> Callable[..., Graph]:
    return getattr(importlib.import_module(family.module), family.builder)


def default_optimizer(model: str) -> str:
    """The optimizer ``model`` trains with by default: sgd, or adamw for GPTs and Llamas (ValueError if unknown)."""
    return parse(model)[0].optimizer


def _call(builder: Callable[..., Graph], model: str, kwargs: dict) -> Graph:
    params = inspect.signature(builder).parameters
    if "optimizer" in kwargs and "optimizer" not in params and "sgd" in params:
        kwargs = dict(kwargs)
        kwargs["sgd"] = kwargs.pop("optimizer")      # the older builders' name for it
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        allowed = ", ".join(p for p in params if p not in ("batch", "dtype"))
        raise ValueError(f"model '{model}' takes no option {', '.join(unknown)} (options: {allowed})")
    return builder(**kwargs)


def build(model: str, batch: int | None = None, size: int | None = None, dtype: str = "float32",
          **options) -> Graph:
    """The graph of ``model`` (see the module docstring for names). ``batch`` and ``size``
    default to the paper's (each builder's defaults); ``options`` go to the builder
    (``optimizer``, ``classes``, ...). Inference models ignore ``optimizer``. Raises ValueError (one
    line) for a malformed name, an unknown option or a configuration that does not build."""
    family, args = parse(model)
    if batch is not None and batch < 1 or size is not None and size < 1:
        raise ValueError(f"model '{model}': batch and size must be positive, got {batch} and {size}")
    if not family.training:
        options.pop("sgd", None)
        options.pop("optimizer", None)
    kwargs = {**args, "dtype": dtype, **options}
    if batch is not None:
        kwargs["batch"] = batch
    if size is not None:
        kwargs[family.size_option] = size
    g = _call(_builder(family), model, kwargs)
    if family in (FAMILIES["gpt"], FAMILIES["llama"]):
        g.name = str(model).strip().lower()     # the name typed, in reports and runs/ (not gpt-2x32)
    return g


def tiny(family: str, dtype: str = "float32", **options) -> Graph:
    """A small configuration of ``family`` (a key of ``FAMILIES``) for tests and quick runs."""
    if family not in TINY:
        raise ValueError(f"no tiny configuration '{family}'; choose from {', '.join(TINY)}")
    return _call(_builder(FAMILIES[family]), family, {**TINY[family], "dtype": dtype, **options})
