"""`python -m engine.serve`: serve N models under a Poisson load; the command line is engine/cli/serve.py,
the server engine/library/server.py."""
import sys

from engine.cli.serve import main, parser
from engine.library.server import Server

__all__ = ["Server", "main", "parser"]

if __name__ == "__main__":
    sys.exit(main())
