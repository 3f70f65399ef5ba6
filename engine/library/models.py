"""Models by the names ``--model`` takes: the training graph (small-cnn, small-lstm, or a zoo
name with its default optimizer) and its batch."""
from __future__ import annotations

from ..autodiff import make_optimizer
from ..errors import UsageError
from ..ir import Graph, Kind
from .imported import is_model_folder, read_model, training_graph

SMALL_MODELS = ("small-cnn", "small-lstm")


def model_graph(model: str, batch: int | None = None, size: int | None = None, dtype: str = "float32",
                optimizer: str | None = None, lr: float | None = None, momentum: float = 0.9,
                weight_decay: float = 1e-4) -> Graph:
    """The training graph of a model named as --model names it (small-cnn, small-lstm or a zoo
    name); UsageError (one line) for an unknown name."""
    if is_model_folder(model):
        return _imported_graph(model, batch, size, optimizer, lr, momentum, weight_decay)
    name = model.lower()
    import zoo

    sgd = make_optimizer(optimizer_of(model, optimizer), lr, momentum, weight_decay)
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


def optimizer_of(model: str, optimizer: str | None) -> str:
    """The optimizer --model trains with: --optimizer, else the model's own (sgd for the small
    and imported models, the zoo family's otherwise); UsageError (one line) for an unknown model."""
    if optimizer or is_model_folder(model) or model.lower() in SMALL_MODELS:
        return optimizer or "sgd"
    import zoo

    try:
        return zoo.default_optimizer(model.lower())
    except ValueError as e:
        raise UsageError(f"--model {model}: {e} (or {', '.join(SMALL_MODELS)})") from None


def _imported_graph(folder: str, batch: int | None, size: int | None, optimizer: str | None, lr: float | None,
                    momentum: float, weight_decay: float) -> Graph:
    """The training graph of an imported model (engine.importer): its shapes are the export's."""
    imported = read_model(folder)
    g = imported.forward_graph()
    if batch is not None and batch != batch_of(g) or size is not None:
        raise UsageError(f"--model {folder}: an imported model keeps the shapes it was exported with (batch "
                         f"{batch_of(g)}); export it again at another batch or size instead of --batch/--size")
    return training_graph(imported, make_optimizer(optimizer or "sgd", lr, momentum, weight_decay))


def batch_of(g: Graph) -> int:
    return next((g.tensors[t].shape[0] for t in g.leaves(Kind.INPUT)), 0)
