"""`python -m engine.serve`: serve N models under a Poisson load; the code is engine/cli/serve.py."""
import sys

from engine.cli.serve import Server, main, parser

__all__ = ["Server", "main", "parser"]

if __name__ == "__main__":
    sys.exit(main())
