"""The run's report for scripts (``--json FILE``, or ``--json -`` for standard output), in
every command (engine/cli/command.py writes it).

One document, format ``swapengine.report/1``, described by ``engine/report.schema.json``
(validated in the tests): ``program`` names the command, ``settings`` its flags, and the
figures are that command's. Keys are added, never renamed: scripts read ``policies[].sim_s``
and friends. The document is filled as the run goes and written once at the end, whatever
the end: a failed run's report says ``"status": "error"`` with the one-line message and
holds what was known by then; an interrupted one says ``"interrupted"``.
"""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from importlib import metadata, resources

from ..checkpoint import write_atomically

FORMAT = "swapengine.report/1"
STDOUT = "-"


def schema() -> dict:
    """The report's JSON Schema (shipped in the package beside engine/report.py)."""
    return json.loads(resources.files("engine").joinpath("report.schema.json").read_text())


def tool_version() -> str:
    try:
        return metadata.version("swapengine")
    except metadata.PackageNotFoundError:      # run from a clone that was never installed
        return "0+unknown"


def json_path_in(argv: list[str]) -> str | None:
    """--json's value read straight from the arguments: a run refused by the flag parser
    still writes its error report where it was asked to (the last one given, as argparse
    takes it)."""
    found = None
    for i, a in enumerate(argv):
        if a == "--json" and i + 1 < len(argv):
            found = argv[i + 1]
        elif a.startswith("--json="):
            found = a[len("--json="):]
    return found


def _finite(x):
    """JSON has no inf or NaN: those become null (the report says so elsewhere: loss_finite)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


class JsonReport:
    def __init__(self, argv: list[str], path: str | None, program: str = "engine.train"):
        self.path = path
        self.doc: dict = {"format": FORMAT, "tool": {"name": "swapengine", "version": tool_version()},
                          "program": program, "created": None, "status": None, "error": None,
                          "command": list(argv)}

    @property
    def to_stdout(self) -> bool:
        return self.path == STDOUT

    def settings(self, values: dict, path: str | None) -> None:
        """The run's settings as parsed, and where --json asked the report to go."""
        self.path = path
        self.doc["settings"] = values

    def update(self, **figures) -> None:
        self.doc.update(figures)

    def finish(self, status: str, error: str | None = None) -> str | None:
        """Write the document (once); why it could not be written (one line), or None. Preflight
        checked the path, so this is a disk filled or a folder removed during the run: the
        caller says so rather than losing the report silently."""
        if not self.path:
            return None
        self.doc.update(status=status, error=error, created=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        text = json.dumps(_finite(self.doc), indent=2, allow_nan=False)
        if self.to_stdout:        # the run's own lines went to stderr (engine/cli/run.main)
            print(text, flush=True)
            return None
        try:                    # atomic for a file; through a device or pipe (/dev/null) as is
            write_atomically(self.path, lambda f: f.write((text + "\n").encode()))
        except OSError as e:
            return f"the --json report could not be written to {self.path} ({e.strerror or e})"
        return None
