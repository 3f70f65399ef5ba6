"""`python -m engine.warmup`: compile the planner now; the command line is engine/cli/warmup.py."""
import sys

from engine.cli.warmup import main, parser

__all__ = ["main", "parser"]

if __name__ == "__main__":
    sys.exit(main())
