"""`python -m engine.importer MODEL.pt2 -o DIR`: import an exported PyTorch program.

Exit status 0 with a summary; 2 with one line for anything that cannot be imported (the
operator, node and source line at fault, or what is wrong with the file)."""
from __future__ import annotations

import argparse
import sys

from ..errors import EngineError, UsageError

PROG = "engine.importer"


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see --help)")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=f"python -m {PROG}", description="Import a program saved by torch.export.save (model and "
                "loss) as a model folder that python -m engine.train --model DIR trains under a memory budget.")
    p.add_argument("program", help="the .pt2 file torch.export.save wrote")
    p.add_argument("-o", "--out", required=True, help="the folder to write (model.json, values.npz)")
    p.add_argument("--inference", action="store_true",
                   help="a forward-only program (its outputs are read back; for python -m engine.infer) instead "
                        "of a training one whose forward returns the loss")
    p.add_argument("--name", help="the model's name in reports (default: the file's name)")
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parser().parse_args(argv)
        try:
            import torch  # noqa: F401
        except ImportError:
            raise UsageError('importing needs torch: pip install ".[torch]" (training and planning do not)') \
                from None
        from . import import_file

        imported = import_file(args.program, args.out, args.inference, args.name)
    except EngineError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    g = imported.graph
    params = sum(g.tensors[t].nbytes for t in g.leaves() if g.tensors[t].kind.name == "PARAMETER")
    print(f"imported {args.program} -> {args.out}: {len(g.nodes)} operators from {len(imported.aten_ops)} "
          f"Core ATen operators, {params / 2**20:.1f} MiB of parameters, task {imported.task}, inputs "
          f"{', '.join(imported.inputs)}")
    for note in imported.notes:
        print(f"  {note}")
    verb = "train" if imported.task == "train" else "infer"
    print(f"next: python -m engine.{verb} --model {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
