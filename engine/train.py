"""`python -m engine.train`: build a model, train it, and print a throughput report.

Bad flags or values get one line on stderr and exit status 2; Ctrl-C saves a
checkpoint (when --checkpoint is given) before stopping.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from tabulate import tabulate
from tqdm import tqdm

from .autodiff import SGD
from .ir import Graph, GraphError, Kind
from .liveness import peak_bytes
from .training import CheckpointError, Trainer
from .units import format_bytes

PROG = "engine.train"
SMALL_MODELS = ("small-cnn", "small-lstm")


class UsageError(Exception):
    """A bad flag or value: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see --help)")


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {v}")
    return v


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return v


def nonnegative_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0 <= v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a non-negative number, got '{text}'")
    return v


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=f"python -m {PROG}", description="Train a model on synthetic data and report throughput.")
    p.add_argument("--model", default="small-cnn",
                   help="small-cnn, small-lstm, or a zoo model: wresnet-D-X, inception-X, nasnet-R, "
                        "rnn-L-XK, brnn-L-XK, resnet-D (default: small-cnn)")
    p.add_argument("--batch", type=positive_int, default=None, help="batch size (default: the model's own)")
    p.add_argument("--size", type=positive_int, default=None,
                   help="image side for CNNs, sequence length for RNNs (default: the model's own)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="tensor dtype")
    p.add_argument("--iterations", type=positive_int, default=150, help="training iterations (default 150)")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial weights and the data (default 0)")
    p.add_argument("--lr", type=positive_float, default=0.05, help="SGD learning rate (default 0.05)")
    p.add_argument("--momentum", type=nonnegative_float, default=0.9, help="SGD momentum (default 0.9)")
    p.add_argument("--weight-decay", type=nonnegative_float, default=1e-4, help="weight decay (default 1e-4)")
    p.add_argument("--checkpoint", metavar="FILE", help="save parameters and optimizer state here (npz)")
    p.add_argument("--checkpoint-every", type=positive_int, default=50, metavar="N",
                   help="with --checkpoint: save every N iterations, and always at exit (default 50)")
    p.add_argument("--resume", metavar="FILE", help="continue from this checkpoint, bit-identically")
    p.add_argument("--json", metavar="FILE", help="also write the report's figures to this JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def build_model(args) -> Graph:
    sgd = SGD(lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    name = args.model.lower()
    if name in SMALL_MODELS:
        from zoo import small

        kw = {"dtype": args.dtype, "sgd": sgd}
        if args.batch:
            kw["batch"] = args.batch
        if name == "small-cnn":
            return small.residual_cnn(**({"image": args.size} if args.size else {}), **kw)
        return small.lstm(**({"steps": args.size} if args.size else {}), **kw)
    import zoo

    try:
        return zoo.build(name, batch=args.batch, size=args.size, dtype=args.dtype, sgd=sgd)
    except ValueError as e:
        raise UsageError(f"--model {args.model}: {e}") from None


def report_rows(g: Graph, iterations: int, seconds: float, first_loss: float, last_loss: float) -> dict:
    s = g.summary()
    batch = next((g.tensors[t].shape[0] for t in g.leaves(Kind.INPUT)), 0)
    return {
        "model": g.name,
        "iterations": iterations,
        "s_per_iter": seconds / max(1, iterations),
        "samples_per_s": batch * iterations / seconds if seconds > 0 else 0.0,
        "loss_first": first_loss,
        "loss_last": last_loss,
        "operators": s.operators,
        "parameter_bytes": s.bytes_by_kind["parameter"] // 2,   # current values, not their next ones
        "peak_bytes": peak_bytes(g),
    }


def print_report(r: dict) -> None:
    table = [[r["model"], r["iterations"], f"{r['s_per_iter']:.4f}", f"{r['samples_per_s']:.1f}",
              f"{r['loss_first']:.3f} -> {r['loss_last']:.3f}", r["operators"],
              format_bytes(r["parameter_bytes"]), format_bytes(r["peak_bytes"])]]
    print(tabulate(table, headers=["model", "iterations", "s/iter", "samples/s", "loss",
                                   "operators", "parameters", "peak memory"]))
    print("backend: numpy reference (unlimited memory); times measured by this run")


def train(args) -> int:
    g = build_model(args)
    trainer = Trainer(g, seed=args.seed)
    if args.resume:
        trainer.load(args.resume)
    s = g.summary()
    print(f"model {g.name}: {s.operators} operators, {s.distinct_sizes} distinct tensor sizes, "
          f"{format_bytes(s.bytes_by_kind['parameter'] // 2)} parameters; "
          f"unlimited-memory peak {format_bytes(peak_bytes(g))}")
    start_iter = trainer.iteration
    todo = max(0, args.iterations - start_iter)
    if args.resume:
        print(f"resumed from {args.resume} at iteration {start_iter}; {todo} to go")
    losses = []
    bar = tqdm(total=todo, desc="train", unit="it", disable=args.quiet, file=sys.stderr)
    t0 = time.perf_counter()
    try:
        while trainer.iteration < args.iterations:
            losses.append(trainer.step())
            bar.update(1)
            bar.set_postfix_str(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")
            if args.checkpoint and trainer.iteration % args.checkpoint_every == 0:
                trainer.save(args.checkpoint)
    except KeyboardInterrupt:
        bar.close()
        if args.checkpoint:
            trainer.save(args.checkpoint)
            print(f"interrupted at iteration {trainer.iteration}; checkpoint saved to {args.checkpoint}")
        else:
            print(f"interrupted at iteration {trainer.iteration} (no --checkpoint given, nothing saved)")
        return 130
    seconds = time.perf_counter() - t0
    bar.close()
    if args.checkpoint:
        trainer.save(args.checkpoint)
    if not losses:
        print(f"nothing to do: the checkpoint is already at iteration {start_iter} >= --iterations")
        return 0
    r = report_rows(g, len(losses), seconds, losses[0], losses[-1])
    print_report(r)
    if args.checkpoint:
        print(f"checkpoint saved to {args.checkpoint} (iteration {trainer.iteration})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=2)
    return 0


def main(argv=None) -> int:
    try:
        return train(parser().parse_args(argv))
    except (UsageError, GraphError, CheckpointError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
