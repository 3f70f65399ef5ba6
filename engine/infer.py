"""`python -m engine.infer`: inference under memory budgets; the command line is engine/cli/infer.py."""
import sys

from engine.cli.infer import main, parser

__all__ = ["main", "parser"]

if __name__ == "__main__":
    sys.exit(main())
