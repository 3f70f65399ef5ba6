"""What every command's ``main`` does around its work (engine.train, engine.infer,
engine.serve, engine.stream_train): one place, so that they refuse, report and exit alike.

- a refusal (any ``EngineError``) is one line on stderr (``common_flags.error_line``), exit 2;
- --json's report (engine/cli/report_json.py) is written whatever the end: settings, the
  figures the work added, and the status; with ``--json -`` it is standard output and the
  run's own lines go to stderr; a run that succeeded but whose report could not be written
  exits 1 (its output is lost);
- Ctrl-C that reaches here (the work did not stop at a boundary of its own) is one line, 130.

Anything else is a bug: its traceback follows, and the report says so.
"""
from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from typing import Callable

from ..errors import EngineError
from .common_flags import error_line
from .report_json import JsonReport, json_path_in


@dataclass(frozen=True)
class Parsed:
    """A command line parsed: what the work takes, the report's settings, and --json."""
    value: object
    settings: dict
    json: str | None


def namespace_settings(args) -> Parsed:
    """The usual ``Parsed`` of argparse's namespace: every flag by name, --json apart (an output, not a setting)."""
    settings = {k: v for k, v in vars(args).items() if k != "json"}
    return Parsed(args, settings, args.json)


def run_command(prog: str, argv: list[str] | None, parse: Callable[[list[str]], Parsed],
                work: Callable[[object, JsonReport], int]) -> int:
    """Parse ``argv``, run ``work(parsed, report)`` (its exit status), and report as above."""
    argv = sys.argv[1:] if argv is None else list(argv)
    report = JsonReport(argv, json_path_in(argv), prog)
    try:
        status, error, code = _outcome(prog, argv, parse, work, report)
    except SystemExit:              # --help, --version: nothing ran, nothing to report
        raise
    except BaseException as e:      # a bug: its traceback follows; the report still says so
        report.finish("error", f"{type(e).__name__}: {e}")
        raise
    lost = report.finish(status, error)
    if lost and status != "error":  # a refused run's own line says what was wrong already
        print(f"{prog}: {lost}; the run itself ended {status}", file=sys.stderr)
        code = code or 1
    return code


def _outcome(prog: str, argv: list[str], parse, work, report: JsonReport) -> tuple[str, str | None, int]:
    """(status, error, exit status) of the run; the one-line refusals printed here."""
    try:
        parsed = parse(argv)
        report.settings(parsed.settings, parsed.json)
        with contextlib.redirect_stdout(sys.stderr) if report.to_stdout else contextlib.nullcontext():
            code = work(parsed.value, report)
        if code >= 128:
            return "interrupted", f"stopped by signal {code - 128}", code
        return "ok", None, code
    except EngineError as e:
        print(error_line(prog, e), file=sys.stderr)
        return "error", str(e), 2
    except KeyboardInterrupt:       # before the work's own handling (training's) took over
        print(f"{prog}: interrupted", file=sys.stderr)
        return "interrupted", "interrupted before the run finished", 130
