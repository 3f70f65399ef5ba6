"""Our CUDA backend beside PyTorch on the same architectures, fp32; swapping, simulated vs measured.

GPU only: without a GPU (or without PyTorch) it prints one line and exits with status 1.
For one WResNet, one Inception and one RNN configuration it prints

1. the time per training iteration (forward, backward, SGD update, batch copied from
   pinned host memory) of our engine with unlimited memory (the "ideal" program, one CUDA
   graph per iteration) beside PyTorch's, TF32 off on both sides. PyTorch runs the *same*
   architecture by construction: its model is translated node by node from the forward
   part of our graph (every ancestor of the loss), with our initial parameters, so the
   first iteration's losses must agree to fp32 rounding, which is printed as a check;
2. under a budget that forces swapping (``--budget`` times the unlimited peak, at least
   the smallest budget that runs), the simulated time per iteration (from a profile
   measured on this GPU) beside the measured one;
3. the link bandwidth measured with pinned memory beside the rate the executor's swap
   copies reach while compute runs (each copy timed with CUDA events on its stream during
   one eagerly issued iteration of the budgeted program).

    python -m bench.cuda_vs_torch [--iterations 10] [--budget 0.5,0.25] [--models wresnet,inception,rnn]
                                  [--quick] [--save-profiles DIR]

PyTorch is imported here only, never by the engine.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import os
import statistics
import sys
import time
import traceback

import numpy as np
from tabulate import tabulate

import zoo
from engine.backends.detect import detect_gpu
from engine.executor import ProgramExecutor
from engine.initializers import initial_state
from engine.ir import Graph, Kind
from engine.liveness import peak_bytes
from engine.program import SWAP_IN, SWAP_OUT
from engine.training import Trainer
from planner import policy
from planner.facts import GraphFacts
from planner.simulate import simulate
from planner.verify import verify

# (model name, batch, size): size is the image side, or the sequence length for RNNs.
CONFIGS = {"wresnet": ("wresnet-50-2", 32, 224), "inception": ("inception-1", 32, 299), "rnn": ("rnn-4-2k", 64, 32)}
# PyTorch's device: "cuda"; a dry run on the fake CUDA (tests) sets "cpu".
TORCH_DEVICE = "cuda"
QUICK = {"wresnet": ("wresnet-50-1", 16, 112), "inception": ("inception-0.5", 8, 149), "rnn": ("rnn-2-1k", 32, 16)}


class RandomData:
    """Fixed random batches (inputs ~ N(0, 1), labels uniform over their classes): the
    teacher labelling of engine.data runs the numpy forward pass, too slow at these sizes."""

    def __init__(self, g: Graph, seed: int = 0, batches: int = 4):
        rng = np.random.default_rng(seed)
        classes = {}
        for n in g.nodes:
            if n.op == "softmax_cross_entropy":
                classes[n.inputs[1]] = g.tensors[n.inputs[0]].shape[1]
        self.batches = []
        for _ in range(batches):
            b = {}
            for t in g.leaves(Kind.INPUT):
                b[t] = rng.standard_normal(g.tensors[t].shape).astype(g.tensors[t].dtype)
            for t in g.leaves(Kind.LABEL):
                b[t] = rng.integers(0, classes.get(t, 2), size=g.tensors[t].shape).astype(g.tensors[t].dtype)
            self.batches.append(b)

    def batch(self, iteration: int) -> dict[int, np.ndarray]:
        return self.batches[iteration % len(self.batches)]


def forward_nodes(g: Graph) -> list[int]:
    """Every node the loss depends on, in the graph's default order: the forward pass."""
    producer = {t: n.id for n in g.nodes for t in n.outputs}
    needed, stack = set(), [g.loss]
    while stack:
        nid = producer.get(stack.pop())
        if nid is not None and nid not in needed:
            needed.add(nid)
            stack.extend(g.nodes[nid].inputs)
    return [n for n in g.default_order() if n in needed]


class TorchTwin:
    """The forward part of ``g`` as PyTorch operations on the same parameters; autograd does
    the backward pass and torch.optim.SGD the update (same formula as sgd_update)."""

    def __init__(self, g: Graph, torch, device, seed: int = 0):
        self.g, self.torch, self.F, self.device = g, torch, torch.nn.functional, device
        self.nodes = [g.nodes[n] for n in forward_nodes(g)]
        state = initial_state(g, seed)
        used = {t for n in self.nodes for t in n.inputs}
        self.values = {}
        params = []
        for t in g.leaves(Kind.PARAMETER):
            if t in used:
                p = torch.nn.Parameter(torch.tensor(state[t], device=device))
                self.values[t] = p
                params.append(p)
        for t in g.leaves(Kind.STATE):
            if t in used:                    # batch-norm running statistics
                self.values[t] = torch.tensor(state[t], device=device)
        sgd = next(n.attrs for n in g.nodes if n.op == "sgd_update")
        self.opt = torch.optim.SGD(params, lr=sgd["lr"], momentum=sgd["momentum"],
                                   weight_decay=sgd["weight_decay"])
        self.feeds = {t: torch.empty(g.tensors[t].shape, dtype=getattr(torch, g.tensors[t].dtype.name),
                                     device=device) for t in g.leaves(Kind.INPUT, Kind.LABEL)}
        # Pinned host copies of the batch, as ours (page-locking needs CUDA: plain on a CPU device).
        pin = device.type == "cuda"
        self.pinned = {t: v.cpu().pin_memory() if pin else v.cpu() for t, v in self.feeds.items()}

    def _apply(self, n, xs):
        F, torch, a = self.F, self.torch, n.attrs
        op = n.op
        if op == "conv2d":
            return [F.conv2d(xs[0], xs[1], stride=a["stride"], padding=a["padding"], groups=a["groups"])]
        if op == "batch_norm":
            y = F.batch_norm(xs[0], xs[3], xs[4], xs[1], xs[2], training=True, momentum=1 - a["momentum"],
                             eps=a["eps"])
            return [y, None, None, None, None]
        if op == "batch_norm_stats":         # done by its batch_norm_apply: one F.batch_norm, as fused
            return [None, None, None, None]
        if op == "batch_norm_apply":
            stats = self.g.nodes[self.g.producer[n.inputs[3]]]
            running = [self.values[t] for t in stats.inputs[1:]]
            return [F.batch_norm(xs[0], *running, xs[1], xs[2], training=True, momentum=1 - stats.attrs["momentum"],
                                 eps=stats.attrs["eps"])]
        if op == "fully_connected":
            return [F.linear(xs[0], xs[1], xs[2] if len(xs) == 3 else None)]
        if op == "softmax_cross_entropy":
            return [F.cross_entropy(xs[0], xs[1].long()), None]
        if op == "max_pool2d":
            return [F.max_pool2d(xs[0], a["kernel"], a["stride"], a["padding"])]
        if op == "avg_pool2d":
            return [F.avg_pool2d(xs[0], a["kernel"], a["stride"], a["padding"],
                                 count_include_pad=a["count_include_pad"])]
        if op == "fill":
            return [torch.full(a["shape"], a["value"], dtype=getattr(torch, a["dtype"]), device=self.device)]
        simple = {"relu": lambda: F.relu(xs[0]), "sigmoid": lambda: torch.sigmoid(xs[0]),
                  "tanh": lambda: torch.tanh(xs[0]), "add": lambda: xs[0] + xs[1], "mul": lambda: xs[0] * xs[1],
                  "scale": lambda: xs[0] * a["factor"], "sum_n": lambda: sum(xs[1:], xs[0]),
                  "global_avg_pool": lambda: xs[0].mean(dim=(2, 3)),
                  "concat": lambda: torch.cat(xs, dim=a["axis"]), "reshape": lambda: xs[0].reshape(a["shape"])}
        if op in simple:
            return [simple[op]()]
        if op == "split":
            return list(torch.split(xs[0], list(a["sizes"]), dim=a["axis"]))
        raise NotImplementedError(f"no PyTorch translation for operator '{op}'")

    def step(self, batch) -> float:
        for t, v in self.feeds.items():
            self.pinned[t].numpy()[...] = batch[t]
            v.copy_(self.pinned[t], non_blocking=True)
        vals = {**self.values, **self.feeds}
        for n in self.nodes:
            vals.update(zip(n.outputs, self._apply(n, [vals[t] for t in n.inputs])))
        loss = vals[self.g.loss]
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss.detach()


def time_torch(g, data, iterations, torch, device) -> tuple[float, float]:
    """(median seconds per iteration, first iteration's loss) of PyTorch on ``device``."""
    twin = TorchTwin(g, torch, device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    first = float(twin.step(data.batch(0)))
    times = []
    for i in range(1, iterations + 3):
        sync()
        t0 = time.perf_counter()
        twin.step(data.batch(i))
        sync()
        if i >= 3:
            times.append(time.perf_counter() - t0)
    return statistics.median(times), first


def time_ours(g, program, data, iterations, copy_rates=False):
    """(median seconds per iteration, first loss, swap-copy rates (h2d, d2h) in bytes/s or None)."""
    from engine.backends.cuda import CudaBackend
    backend = CudaBackend()
    try:
        tr = Trainer(g, seed=0, runner=ProgramExecutor(program, g, backend), data=data)
        first = tr.step()
        tr.step()
        times = []
        for _ in range(iterations):
            tr.step()
            times.append(tr.step_seconds)
        rates = None
        if copy_rates:
            backend.timings = []
            tr.step()                      # issued eagerly, every copy timed on its stream
            rates = []
            for stream in (SWAP_IN, SWAP_OUT):
                copies = [(n, t1 - t0) for s, n, t0, t1 in backend.timings if s == stream and n >= 1 << 20]
                rates.append(sum(n for n, _ in copies) / sum(d for _, d in copies) if copies else float("nan"))
            backend.timings = None
        return statistics.median(times), first, rates
    finally:
        backend.close()


def measure_model(family, configs, args, torch, speed, swap, link_rows) -> None:
    """One model's three rows (speed, swapping, link), appended as each is measured."""
    from engine.cuda_profiling import measure_cuda_profile
    model, batch, size = configs[family]
    g = zoo.build(model, batch=batch, size=size)
    data = RandomData(g)
    facts = GraphFacts(g)
    ideal = policy.unlimited_program(g, facts)
    ours, our_loss, _ = time_ours(g, ideal, data, args.iterations)
    theirs, torch_loss = time_torch(g, data, args.iterations, torch, torch.device(TORCH_DEVICE))
    gc.collect()
    if TORCH_DEVICE == "cuda":
        torch.cuda.empty_cache()           # give PyTorch's cached blocks back before our arenas
    same = abs(our_loss - torch_loss) <= 1e-3 * max(1.0, abs(torch_loss))
    speed.append([model, batch, size, f"{ours * 1e3:.1f}", f"{theirs * 1e3:.1f}", f"{ours / theirs:.2f}",
                  f"{our_loss:.5f} / {torch_loss:.5f} {'ok' if same else 'DIFFER'}"])
    print(tabulate([speed[-1]]), file=sys.stderr, flush=True)

    profile = measure_cuda_profile(g, ideal, data=data)
    if args.save_profiles:
        path = os.path.join(args.save_profiles, f"profile_{model}_b{batch}_s{size}.json")
        profile.save(path)
        print(f"profile saved to {path}", file=sys.stderr, flush=True)
    secs = profile.node_seconds(g)
    peak = peak_bytes(g)
    for fraction in args.budget:
        budget = max(facts.smallest_budget, int(fraction * peak))
        program = policy.plan_with("swapadvisor", g, budget, profile, facts=facts, allocator="pool")
        verify(program, g, budget)
        sim = simulate(program, g, profile, secs).total
        real, _, rates = time_ours(g, program, data, args.iterations, copy_rates=True)
        swap.append([model, f"{budget / 2**20:.0f}", f"{budget / peak:.2f}",
                     f"{program.bytes_moved(g, SWAP_IN) / 2**20:.0f} / {program.bytes_moved(g, SWAP_OUT) / 2**20:.0f}",
                     f"{sim * 1e3:.1f}", f"{real * 1e3:.1f}", f"{(sim - real) / real:+.1%}", f"{ours / real:.2f}"])
        link = profile.link
        link_rows.append([model, f"{budget / peak:.2f}", f"{link.h2d_bytes_per_s / 1e9:.1f}",
                          f"{rates[0] / 1e9:.1f}", f"{rates[0] / link.h2d_bytes_per_s:.0%}",
                          f"{link.d2h_bytes_per_s / 1e9:.1f}", f"{rates[1] / 1e9:.1f}",
                          f"{rates[1] / link.d2h_bytes_per_s:.0%}", f"{link.duplex_bytes_per_s / 1e9:.1f}"])
        print(tabulate([swap[-1]]), file=sys.stderr, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--budget", default="0.5",
                    help="budgets as fractions of the unlimited peak, comma-separated (e.g. 0.5,0.25)")
    ap.add_argument("--models", default=",".join(CONFIGS))
    ap.add_argument("--quick", action="store_true", help="smaller configurations")
    ap.add_argument("--save-profiles", metavar="DIR", help="save each profile measured on the GPU here")
    args = ap.parse_args(argv)
    try:
        args.budget = [float(f) for f in args.budget.split(",")]
    except ValueError:
        ap.error(f"--budget takes fractions such as 0.5,0.25, not {args.budget!r}")
    count, reason = detect_gpu()
    if count == 0:
        print(f"cuda_vs_torch: no GPU ({reason}); this benchmark runs on a GPU only", file=sys.stderr)
        return 1
    try:
        import torch
    except ImportError as e:
        print(f"cuda_vs_torch: PyTorch is not importable ({e}); it is the reference this benchmark needs",
              file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    name = torch.cuda.get_device_name() if TORCH_DEVICE == "cuda" else TORCH_DEVICE
    print(f"# python -m bench.cuda_vs_torch {' '.join(argv or sys.argv[1:])}  ({datetime.date.today()}, "
          f"{name}, PyTorch {torch.__version__}, fp32, TF32 off)")
    speed, swap, link_rows, failed = [], [], [], []
    configs = QUICK if args.quick else CONFIGS
    for family in args.models.split(","):
        try:
            measure_model(family, configs, args, torch, speed, swap, link_rows)
        except Exception:                  # one model's failure must not lose the others' figures
            failed.append(family)
            print(f"{family}: FAILED\n{traceback.format_exc()}", file=sys.stderr, flush=True)
    print("\nTime per iteration, unlimited memory (ms)")
    print(tabulate(speed, headers=["model", "batch", "size", "ours", "PyTorch", "ours/PyTorch",
                                   "first loss ours / PyTorch"], disable_numparse=True))
    print("\nUnder budgets that force swapping (SwapAdvisor planner, unsearched, profile measured here)")
    print(tabulate(swap, headers=["model", "budget MiB", "of peak", "MiB in / out", "simulated ms", "measured ms",
                                  "sim error", "unlimited/measured"], disable_numparse=True))
    print("\nLink (pinned memory, GB/s) beside the executor's swap copies while compute runs (>= 1 MiB copies)")
    print(tabulate(link_rows, headers=["model", "of peak", "h2d link", "h2d swaps", "of link", "d2h link",
                                       "d2h swaps", "of link", "duplex link"], disable_numparse=True))
    if failed:
        print(f"\nfailed: {', '.join(failed)} (tracebacks above)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
