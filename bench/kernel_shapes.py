"""Our GEMM-bound kernels beside PyTorch's, shape by shape, on the GPU (fp32, TF32 off).

For one model's training graph (default wresnet-50-2, batch 32, 224x224): every distinct
convolution and dense operator (forward, data gradient, weight gradient), run alone on the same
random inputs by our CUDA kernels and by PyTorch's twin (``torch.nn.functional.conv2d``,
``torch.nn.grad.conv2d_input`` / ``conv2d_weight``, ``torch.nn.functional.linear``, matmul), each
timed with CUDA events (median of ``--repeats`` after a warm-up), the results compared (relative
error). Per shape: how many nodes share it, milliseconds each, our TFLOP/s (the operator's own
cost model), ours over PyTorch's, and the milliseconds per iteration the gap costs; the shapes
sorted by that, so the first rows are where a kernel change pays most. A whole model's kernels
take seconds here instead of the minutes ``bench.cuda_vs_torch`` spends: for tuning kernels
within a short lease.

    python -m bench.kernel_shapes [--model wresnet-50-2 --batch 32 --size 224] [--repeats 10] [--top 15]

GPU only: without a GPU (or PyTorch) it prints one line and exits with status 1. PyTorch is
imported here only, never by the engine.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from types import SimpleNamespace

import numpy as np
from tabulate import tabulate

import zoo
from engine.backends.detect import detect_gpu
from engine.profile import signature
from engine.program import COMPUTE
from ops import registry
from ops.workspace import workspace_bytes

GEMM_OPS = ("conv2d", "conv2d_grad_data", "conv2d_grad_weight", "fully_connected", "fully_connected_grad_data",
            "fully_connected_grad_weight")
TORCH_DEVICE = "cuda"        # tests set "cpu" (with our kernels on the fake driver)
ALIGN = 256


def distinct_shapes(g) -> list[tuple[object, int]]:
    """(one node, how many nodes share its signature) per distinct GEMM-bound signature, in graph order."""
    seen: dict[str, list] = {}
    for n in g.nodes:
        if n.op in GEMM_OPS:
            seen.setdefault(signature(g, n.id), [n, 0])[1] += 1
    return [(n, count) for n, count in seen.values()]


def torch_twin(torch, n, xs):
    """PyTorch's result for node ``n`` (its first output) from its inputs ``xs`` (torch tensors)."""
    F, a = torch.nn.functional, n.attrs
    if n.op == "fully_connected":
        return F.linear(*xs)
    if n.op == "fully_connected_grad_data":   # (w, dy) -> dy @ w
        return xs[1] @ xs[0]
    if n.op == "fully_connected_grad_weight":  # (x, dy) -> dy.T @ x
        return xs[1].t() @ xs[0]
    conv = dict(stride=tuple(a["stride"]), padding=tuple(a["padding"]), dilation=tuple(a.get("dilation", (1, 1))),
                groups=a["groups"])
    if n.op == "conv2d":
        return F.conv2d(xs[0], xs[1], **conv)
    if n.op == "conv2d_grad_data":            # (w, dy)
        w, dy = xs
        shape = (dy.shape[0], w.shape[1] * a["groups"], *a["input_hw"])
        return torch.nn.grad.conv2d_input(shape, w, dy, **conv)
    if n.op == "conv2d_grad_weight":          # (x, dy)
        x, dy = xs
        shape = (dy.shape[1], x.shape[1] // a["groups"], *a["kernel_hw"])
        return torch.nn.grad.conv2d_weight(x, shape, dy, **conv)
    raise ValueError(f"no PyTorch twin for '{n.op}'")


def _ours(backend, n, specs_in, specs_out, arrays, repeats: int):
    """(median seconds of one launch, first output) of node ``n`` on our backend."""
    sizes = [-(-int(np.prod(s.shape)) * np.dtype(s.dtype).itemsize // ALIGN) * ALIGN for s in (*specs_in, *specs_out)]
    scratch = workspace_bytes(tuple(registry.get(n.op).cuda_workspaces(n.attrs, specs_in, specs_out)))
    backend.allocate_arena(sum(sizes) + scratch, scratch)
    offsets = np.cumsum([0] + sizes[:-1])
    views = [backend.view(int(o), s.shape, s.dtype) for o, s in zip(offsets, (*specs_in, *specs_out))]
    ins, outs = views[:len(specs_in)], views[len(specs_in):]
    for v, a in zip(ins, arrays):
        backend.write(v, a)
    node = SimpleNamespace(op=n.op, attrs=n.attrs, id=n.id)
    backend.launch(COMPUTE, node, ins, outs)          # warm-up: module load, launch binding
    backend.synchronize()
    backend.timings = []
    for _ in range(repeats):
        backend.launch(COMPUTE, node, ins, outs)
    backend.synchronize()
    seconds = statistics.median(t1 - t0 for _, _, t0, t1 in backend.timings)
    backend.timings = None
    return seconds, backend.read(outs[0])


def _theirs(torch, n, arrays, repeats: int):
    """(median seconds, result as numpy) of PyTorch's twin of node ``n``."""
    device = torch.device(TORCH_DEVICE)
    xs = [torch.tensor(a, device=device) for a in arrays]
    out = torch_twin(torch, n, xs)                    # warm-up: cuDNN's algorithm choice
    if device.type != "cuda":
        return float("nan"), out.cpu().numpy()
    times = []
    for _ in range(repeats):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        torch_twin(torch, n, xs)
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) / 1e3)
    return statistics.median(times), out.cpu().numpy()


def measure(g, backend, torch, repeats: int, seed: int = 0) -> list[dict]:
    """One row per distinct shape: op, shape text, count, ours and theirs seconds, TFLOP/s, error."""
    rng = np.random.default_rng(seed)
    rows = []
    for n, count in distinct_shapes(g):
        specs_in = [g.tensors[t] for t in n.inputs]
        specs_out = [g.tensors[t] for t in n.outputs]
        arrays = [rng.standard_normal(s.shape).astype(s.dtype) for s in specs_in]
        ours, got = _ours(backend, n, specs_in, specs_out, arrays, repeats)
        theirs, want = _theirs(torch, n, arrays, repeats)
        flops = registry.get(n.op).cost(n.attrs, specs_in, specs_out).flops
        err = float(np.linalg.norm(got.astype(np.float64) - want) / max(np.linalg.norm(want), 1e-30))
        rows.append(dict(op=n.op, shape=" ".join("x".join(map(str, s.shape)) for s in specs_in), count=count,
                         ours=ours, theirs=theirs, tflops=flops / ours / 1e12 if ours > 0 else float("nan"), err=err))
    return rows


def table(rows: list[dict], top: int) -> str:
    rows = sorted(rows, key=lambda r: -(r["count"] * (r["ours"] - r["theirs"])))
    out = [[r["op"], r["shape"], r["count"], f"{r['ours'] * 1e3:.3f}", f"{r['theirs'] * 1e3:.3f}",
            f"{r['ours'] / r['theirs']:.2f}", f"{r['tflops']:.1f}", f"{r['count'] * (r['ours'] - r['theirs']) * 1e3:.1f}",
            f"{r['err']:.1e}"] for r in rows[:top]]
    total_ours = sum(r["count"] * r["ours"] for r in rows)
    total_theirs = sum(r["count"] * r["theirs"] for r in rows)
    head = ["operator", "inputs", "nodes", "ours ms", "PyTorch ms", "ours/PyTorch", "our TFLOP/s", "gap ms/iter",
            "rel. error"]
    return (tabulate(out, head) + f"\nall {len(rows)} shapes, per iteration: ours {total_ours * 1e3:.1f} ms, "
            f"PyTorch {total_theirs * 1e3:.1f} ms ({total_ours / total_theirs:.2f}x)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="wresnet-50-2")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args(argv)
    count, why = detect_gpu()
    if count == 0:
        print(f"bench.kernel_shapes needs a GPU: {why}", file=sys.stderr)
        return 1
    try:
        import torch
    except ImportError:
        print("bench.kernel_shapes needs PyTorch as the reference (pip install torch)", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from engine.backends.cuda import CudaBackend
    g = zoo.build(a.model, batch=a.batch, size=a.size)
    backend = CudaBackend(graphs=False)
    try:
        rows = measure(g, backend, torch, a.repeats)
    finally:
        backend.close()
    print(f"# python -m bench.kernel_shapes --model {a.model} --batch {a.batch} --size {a.size}: fp32, TF32 off, "
          f"{backend.device_name}, PyTorch {torch.__version__}")
    print(table(rows, a.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
