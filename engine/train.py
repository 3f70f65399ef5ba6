"""`python -m engine.train`: the entry point; the command line lives in engine/cli/."""
import sys

from importlib.metadata import PackageNotFoundError

try:
    if __name__ == "__main__":      # before the planner's compiled code is imported: engine/cli/first_run.py
        from engine.cli.first_run import choose_tier
        choose_tier()

    from engine.cli.flags import UsageError, parser
    from engine.cli.run import main
except (ModuleNotFoundError, PackageNotFoundError) as e:    # a clone run by a Python without the engine
    if __name__ != "__main__" or not e.name or e.name.startswith("engine"):
        raise
    sys.exit(f"engine.train: {e.name} is not installed in this Python ({sys.executable}): install the engine "
             "with its dependencies (pip install .), or run the Python it is installed in")

__all__ = ["UsageError", "main", "parser"]

if __name__ == "__main__":
    sys.exit(main())
