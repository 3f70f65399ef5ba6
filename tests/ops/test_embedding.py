"""ops/embedding.py: the lookup, and its gradient's deterministic scatter-add."""
import numpy as np
import pytest

from ops import registry
from ops.registry import OpError, ShapeError

from .opcheck import check_gradient, run_op

rng = np.random.default_rng(0)


@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
def test_lookup_and_gradient(id_dtype):
    table = rng.standard_normal((7, 5))
    ids = np.array([[1, 3, 1, 6], [0, 1, 3, 3]], id_dtype)
    (y,) = run_op("embedding", [table, ids])
    assert y.shape == (2, 4, 5) and np.array_equal(y, table[ids])
    grads = check_gradient("embedding", [table, ids], wrt=[0])
    assert grads[1] is None


def test_gradient_adds_positions_in_order_and_zeroes_unseen_rows():
    ids = np.array([2, 0, 2, 2, 4], np.int32)
    dy = rng.standard_normal((5, 3)).astype(np.float32)
    (dtable,) = run_op("embedding_grad", [ids, dy], vocab=6)
    expect = np.zeros((6, 3), np.float32)
    for p, v in enumerate(ids):
        expect[v] += dy[p]
    assert np.array_equal(dtable, expect)
    assert not dtable[[1, 3, 5]].any()


def test_out_of_range_ids_are_named():
    with pytest.raises(ValueError, match=r"id 9 at position 2 is outside the table's rows \[0, 7\)"):
        run_op("embedding", [np.zeros((7, 2)), np.array([0, 1, 9])])


def test_errors():
    emb = registry.get("embedding")
    with pytest.raises(ShapeError, match="integer dtype"):
        emb.infer({}, [np.zeros((4, 2)), np.zeros(3)])
    with pytest.raises(ShapeError, match=r"\[V, D\]"):
        emb.infer({}, [np.zeros(4), np.zeros(3, np.int32)])
    grad = registry.get("embedding_grad")
    with pytest.raises(OpError, match="vocab must be a positive int"):
        grad.canon({"vocab": 0})
    with pytest.raises(ShapeError, match="one row per id"):
        grad.infer({"vocab": 3}, [np.zeros((2, 3), np.int32), np.zeros((3, 2, 4))])
    with pytest.raises(OpError, match="int32 and int64 ids"):
        emb.cuda_launches({}, [np.zeros((4, 2), np.float32), np.zeros(3, np.int16)], [np.zeros((3, 2), np.float32)])
