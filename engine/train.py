"""`python -m engine.train`: the entry point; the command line lives in engine/cli/."""
import sys

if __name__ == "__main__":      # before the planner's compiled code is imported: engine/cli/first_run.py
    from engine.cli.first_run import choose_tier
    choose_tier()

from engine.cli.flags import UsageError, parser  # noqa: E402
from engine.cli.run import main  # noqa: E402

__all__ = ["UsageError", "main", "parser"]

if __name__ == "__main__":
    sys.exit(main())
