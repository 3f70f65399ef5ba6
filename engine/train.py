"""`python -m engine.train`: the entry point; the command line lives in engine/cli/."""
import sys

from engine.cli.flags import UsageError, parser
from engine.cli.run import main

__all__ = ["UsageError", "main", "parser"]

if __name__ == "__main__":
    sys.exit(main())
