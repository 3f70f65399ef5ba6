"""From a ``.pt2`` file to our forward graph: load (after engine.importer.archive's checks),
decompose to Core ATen, and convert node by node (engine.importer.convert, .aten)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelImportError
from ..initializers import IMPORTED
from ..ir import Graph
from . import aten
from .archive import check_archive, check_sample_inputs
from .convert import FLOAT_DTYPES, Const, Converter, target_name, to_numpy, where

# Core ATen operators the default decompositions would break up but we run whole.
KEEP_WHOLE = ("nll_loss_forward", "scaled_dot_product_attention")
# Operators never evaluated at import time: their results change from call to call.
RANDOM_WORDS = ("rand", "bernoulli", "dropout", "normal", "uniform", "multinomial", "randperm", "exponential")
# Views and copies a label passes through on its way to the loss.
LABEL_PATHS = ("view", "_unsafe_view", "reshape", "squeeze", "unsqueeze", "clone", "alias", "_to_copy",
               "flatten", "contiguous")


@dataclass
class Imported:
    graph: Graph                      # forward: loss (train) or outputs (inference) set
    values: dict[str, np.ndarray]     # leaf name -> value, for every leaf with init "imported"
    task: str
    inputs: list[str]                 # the export's user inputs, in order
    notes: list[str]
    aten_ops: list[str]               # distinct Core ATen operators the program used


def load_program(path: str):
    """torch.export.load of a checked archive; ModelImportError (one line) otherwise."""
    samples = check_archive(path)
    import torch

    check_sample_inputs(path, samples)
    try:
        return torch.export.load(path)
    except Exception as e:     # noqa: BLE001  (torch raises many types; each is a refusal)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelImportError(f"'{path}' is not a usable torch.export program: torch.export.load failed "
                               f"({first[:200]}); give a file torch.export.save wrote") from None


def decompose(ep):
    """The program in Core ATen, but for the operators in KEEP_WHOLE."""
    import torch

    table = torch.export.default_decompositions()
    for name in KEEP_WHOLE:
        for overload in getattr(torch.ops.aten, name).overloads():
            table.pop(getattr(getattr(torch.ops.aten, name), overload), None)
    try:
        return ep.run_decompositions(table)
    except Exception as e:     # noqa: BLE001
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelImportError(f"the program does not decompose to Core ATen ({first[:200]})") from None


def convert_program(ep, name: str, inference: bool = False) -> Imported:
    """Our forward graph of exported program ``ep``: training (its one output a scalar loss)
    unless ``inference`` (its outputs read back)."""
    ep = decompose(ep)
    from torch.export.graph_signature import InputKind, OutputKind

    graph = ep.graph
    sig = ep.graph_signature
    inputs_by_name = {s.arg.name: s for s in sig.input_specs}
    output_node = next(n for n in graph.nodes if n.op == "output")
    results = list(output_node.args[0])
    if len(results) != len(sig.output_specs):
        raise ModelImportError("the program's outputs do not match its signature; export it again")
    _refuse_dynamic_shapes(graph)

    kept_outputs, mutations, notes = _classify_outputs(ep, sig, results, OutputKind)
    task = "inference" if inference else "train"
    if task == "train":
        _require_loss(kept_outputs)

    live = _live_nodes([*kept_outputs, *(v for _, v in mutations)])
    labels = _label_inputs(graph, live)
    tied = _tied_names(ep, InputKind)
    c = Converter(Graph(name))
    user_inputs, used_ops = [], set()
    for node in graph.nodes:
        c.begin(node)
        if node.op == "placeholder":
            spec = inputs_by_name[node.name]
            if spec.kind == InputKind.USER_INPUT:
                user_inputs.append(_user_input(c, node, node in labels))
            elif node in live:
                c.env[node] = _state_input(c, ep, spec, InputKind, tied.get(spec.target, spec.target))
            elif spec.kind == InputKind.PARAMETER and spec.target not in tied and spec.target not in tied.values():
                notes.append(f"left out: parameter '{spec.target}', which the loss does not use")
        elif node.op == "call_function":
            if node not in live:
                continue
            used_ops.add(target_name(node))
            c.env[node] = _convert_node(c, node)
        elif node.op != "output":
            raise ModelImportError(f"node '{node.name}' is a {node.op}; a decomposed export holds only "
                                   "placeholders, operator calls and the output")

    c.begin(output_node)
    _finish_outputs(c, task, kept_outputs, mutations)
    return Imported(c.g, c.values, task, user_inputs, notes + c.notes, sorted(used_ops))


def _classify_outputs(ep, sig, results, kinds) -> tuple[list, list, list[str]]:
    """(user outputs, [(buffer, its next value)] for float buffers, notes): integer counters are
    left out; any other kind of output (gradients, mutated inputs) is refused."""
    kept, mutations, counters = [], [], []
    for spec, value in zip(sig.output_specs, results):
        if spec.kind == kinds.USER_OUTPUT:
            kept.append(value)
        elif spec.kind == kinds.BUFFER_MUTATION:
            buffer_dtype = str(ep.state_dict[spec.target].dtype).replace("torch.", "")
            if buffer_dtype in FLOAT_DTYPES:
                mutations.append((spec.target, value))
            else:
                counters.append(spec.target)
        else:
            raise ModelImportError(f"the program has a {spec.kind.name.lower()} output ('{spec.arg.name}'): "
                                   "export the forward pass only (model and loss), without autograd or "
                                   "mutated inputs")
    notes = []
    if counters:
        notes.append(f"left out: the updates of {len(counters)} integer buffers ('{counters[0]}'"
                     f"{', ...' if len(counters) > 1 else ''}: counters PyTorch reads only when batch norm's "
                     "momentum is None); they keep their imported values")
    return kept, mutations, notes


def _require_loss(outputs) -> None:
    """A training program returns exactly one scalar floating-point value: the loss."""
    val = outputs[0].meta.get("val") if len(outputs) == 1 and hasattr(outputs[0], "meta") else None
    if val is None or tuple(val.shape) != () or not val.dtype.is_floating_point:
        raise ModelImportError("the program has no loss output: its forward must return one scalar loss "
                               "(wrap the model so forward(inputs, targets) returns the loss, as the README "
                               "shows), or import it with --inference to run it forward only")


def _refuse_dynamic_shapes(graph) -> None:
    for node in graph.nodes:
        val = node.meta.get("val")
        shape = getattr(val, "shape", None)
        if shape is None:
            continue
        for i, d in enumerate(shape):
            if not isinstance(d, int):
                raise ModelImportError(f"node '{node.name}'{where(node)} has a dynamic size ({d}) in dimension {i}: "
                                       "export with static shapes (no dynamic_shapes=) for now")


def _live_nodes(roots) -> set:
    live, stack = set(), [r for r in roots if hasattr(r, "op")]
    while stack:
        n = stack.pop()
        if n in live:
            continue
        live.add(n)
        stack.extend(n.all_input_nodes)
    return live


def _label_inputs(graph, live) -> set:
    """The placeholders the loss reads as its target, through views and copies."""
    labels = set()
    for node in graph.nodes:
        if node in live and node.op == "call_function" and target_name(node).startswith("aten.nll_loss"):
            t = node.args[1]
            while t.op == "call_function" and target_name(t).split(".")[:2][-1] in LABEL_PATHS:
                t = t.args[0]
            if t.op == "placeholder":
                labels.add(t)
    return labels


def _user_input(c: Converter, node, is_label: bool) -> str:
    shape, dtype = c.shape(node), c.dtype(node)
    if dtype in FLOAT_DTYPES:
        c.env[node] = c.g.input(node.name, shape, dtype)
    elif dtype in ("int32", "int64"):
        c.env[node] = (c.g.label if is_label else c.g.input)(node.name, shape, dtype)
    else:
        raise ModelImportError(f"input '{node.name}' is {dtype}; inputs must be float32/float64 or int32/int64")
    return node.name


def _tied_names(ep, kinds) -> dict[str, str]:
    """Parameter or buffer name -> the first name of the same tensor (tied weights, which the
    decomposed program may read under either name), for every name but the first."""
    first, tied = {}, {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind not in (kinds.PARAMETER, kinds.BUFFER) or spec.target not in ep.state_dict:
            continue
        t = ep.state_dict[spec.target]
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if key in first:
            tied[spec.target] = first[key]
        else:
            first[key] = spec.target
    return tied


def _state_input(c: Converter, ep, spec, kinds, name: str):
    """A parameter, buffer or constant placeholder's value: a leaf with its imported value
    (named ``name``: the first name of a tied tensor), or a Const."""
    if spec.kind in (kinds.CONSTANT_TENSOR,) or (spec.kind == kinds.BUFFER and not spec.persistent):
        return Const(ep.constants[spec.target])
    if spec.kind not in (kinds.PARAMETER, kinds.BUFFER):
        raise ModelImportError(f"input '{spec.arg.name}' is a {spec.kind.name.lower()}; only parameters, "
                               "buffers, constants and tensors are supported")
    value = ep.state_dict[spec.target]
    a = to_numpy(value, f"'{spec.target}'")
    if a.dtype.name not in FLOAT_DTYPES:
        if a.dtype.kind in "iub":      # an integer buffer (a counter) a kept node reads: a constant
            return Const(value.detach().clone())
        raise ModelImportError(f"'{spec.target}' is {a.dtype}; export in float32 or float64")
    if name in c.values:            # a tied tensor already read under its first name
        return c.g.tensor_id(name)
    trained = spec.kind == kinds.PARAMETER and value.requires_grad
    leaf = (c.g.parameter if trained else c.g.state)(name, a.shape, a.dtype, init=IMPORTED)
    c.values[name] = a
    return leaf


def _convert_node(c: Converter, node):
    """A Const when every input is one (evaluated now, with torch), else our operators."""
    name = target_name(node)
    if any(w in name.lower() for w in RANDOM_WORDS):
        raise c.refuse("random operators (dropout, sampling) are not supported: export with the model "
                       "in eval mode or with dropout 0")
    if all(isinstance(c.env[a], Const) for a in node.all_input_nodes):
        return Const(_evaluate(c, node))
    convert = aten.CONVERTERS.get(name)
    if convert is None:
        raise c.refuse(f"operator {name} is not supported (supported: docs/importing.md)")
    return convert(c, node)


def _evaluate(c: Converter, node):
    from torch.fx.node import map_arg

    args = map_arg(node.args, lambda n: c.env[n].value)
    kwargs = map_arg(node.kwargs, lambda n: c.env[n].value)
    try:
        return node.target(*args, **kwargs)
    except Exception as e:     # noqa: BLE001
        raise c.refuse(f"evaluating it on constants failed ({str(e).splitlines()[0][:200]})") from None


def _finish_outputs(c: Converter, task: str, kept_outputs, mutations) -> None:
    g = c.g
    if task == "train":
        g.set_loss(c.tensor(kept_outputs[0]))
    else:
        for out in kept_outputs:
            g.mark_output(c.tensor(out))
    pairs = set(g.state_pairs)
    for buffer, value in mutations:
        current = g.tensor_id(buffer)
        nxt = c.env.get(value)
        if not isinstance(nxt, int) or (current, nxt) not in pairs:
            raise ModelImportError(f"buffer '{buffer}' is updated by node '{value.name}' ({target_name(value)}), "
                                   "which the importer cannot keep as persisted state (only batch norm's "
                                   "running statistics are)")
