"""Models by the names ``--model`` takes: the training graph (small-cnn, small-lstm, or a zoo
name with its default optimizer) and its batch."""
from __future__ import annotations

from ..autodiff import make_optimizer
from ..errors import UsageError
from ..ir import Graph, Kind

SMALL_MODELS = ("small-cnn", "small-lstm")


def model_graph(model: str, batch: int | None = None, size: int | None = None, dtype: str = "float32",
                optimizer: str | None = None, lr: float | None = None, momentum: float = 0.9,
                weight_decay: float = 1e-4) -> Graph:
    """The training graph of a model named as --model names it (small-cnn, small-lstm or a zoo
    name); UsageError (one line) for an unknown name."""
    name = model.lower()
    import zoo

    try:
        kind = optimizer or ("sgd" if name in SMALL_MODELS else zoo.default_optimizer(name))
    except ValueError as e:
        raise UsageError(f"--model {model}: {e} (or {', '.join(SMALL_MODELS)})") from None
    sgd = make_optimizer(kind, lr, momentum, weight_decay)
    if name in SMALL_MODELS:
        from zoo import small

        kw = {"dtype": dtype, "sgd": sgd}
        if batch:
            kw["batch"] = batch
        if name == "small-cnn":
            return small.residual_cnn(**({"image": size} if size else {}), **kw)
        return small.lstm(**({"steps": size} if size else {}), **kw)
    try:
        return zoo.build(name, batch=batch, size=size, dtype=dtype, optimizer=sgd)
    except ValueError as e:
        raise UsageError(f"--model {model}: {e} (or {', '.join(SMALL_MODELS)})") from None


def batch_of(g: Graph) -> int:
    return next((g.tensors[t].shape[0] for t in g.leaves(Kind.INPUT)), 0)
