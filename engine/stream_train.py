"""`python -m engine.stream_train`: training on a stream of changing graphs (engine/cli/stream_run.py)."""
import sys

from engine.cli.stream_run import main, parser

__all__ = ["main", "parser"]

if __name__ == "__main__":
    sys.exit(main())
