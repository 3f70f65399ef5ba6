import numpy as np
import pytest

import ops
from ops import registry
from ops.registry import OpError, UnknownOpError, check_attrs, int_pair


def test_every_operator_declares_everything_in_one_place():
    assert len(ops.REGISTRY) >= 30
    for name, op in ops.REGISTRY.items():
        assert op.name == name
        assert op.cuda_kernels, f"{name} names no CUDA kernel"
        for method in ("infer", "compute"):
            assert getattr(type(op), method) is not getattr(registry.Op, method), f"{name} lacks {method}"
        if op.differentiable and op.arity != 0:
            assert type(op).gradient is not registry.Op.gradient, f"{name} lacks a gradient"


def test_backward_operators_are_registered_operators():
    for name in ("conv2d_grad_data", "conv2d_grad_weight", "batch_norm_grad", "max_pool2d_grad",
                 "softmax_cross_entropy_grad", "fully_connected_grad_weight", "relu_grad"):
        assert not ops.get(name).differentiable


def test_unknown_operator_lists_the_known_ones():
    with pytest.raises(UnknownOpError, match="unknown operator 'nope' \\(known: .*conv2d"):
        ops.get("nope")


def test_attribute_helpers():
    assert int_pair(3, "k") == (3, 3) and int_pair([1, 2], "k") == (1, 2)
    with pytest.raises(OpError, match="int or a pair"):
        int_pair((1, 2, 3), "k")
    assert check_attrs({"a": 1}, {"a": 0, "b": 2}) == {"a": 1, "b": 2}
    with pytest.raises(OpError, match="unknown attributes"):
        check_attrs({"c": 1}, {"a": 0})
    with pytest.raises(OpError, match="missing attributes"):
        check_attrs({}, {"a": None}, required=["a"])


def test_default_cost_counts_bytes_moved():
    x = np.zeros((4, 4), np.float32)
    c = ops.get("relu").cost({}, [x], [x])
    assert c.bytes == 2 * 64 and c.flops == 16
