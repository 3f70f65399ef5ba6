"""--config FILE: run with the settings a file holds, e.g. the ``settings`` an earlier run's
--json report recorded (the whole report, or that object alone).

The file's settings become command-line words (engine/cli/settings.py's table) placed before
the command's own, so a flag typed on the command line wins over the file. Each setting is
parsed on its own first, by the same flag types: an unknown key, a value of the wrong JSON
type or one the flag refuses is one line naming the file and the key, exit status 2.
"""
from __future__ import annotations

from ..files import read_json
from .flags import UsageError, parser
from .report_json import FORMAT
from .settings import BY_KEY

FLAG = "--config"
WANTS = f"a JSON object of settings ({', '.join(BY_KEY)}), or a report --json wrote"


def config_path_in(argv: list[str]) -> str | None:
    """--config's value read from the arguments (one --config at most)."""
    found = []
    for i, a in enumerate(argv):
        if a == FLAG:
            found.append(argv[i + 1] if i + 1 < len(argv) else None)
        elif a.startswith(FLAG + "="):
            found.append(a[len(FLAG) + 1:])
    if len(found) > 1:
        raise UsageError(f"{FLAG} given {len(found)} times; give one file (flags on the command line override it)")
    if found and not found[0]:
        raise UsageError(f"{FLAG} needs a file name: {WANTS}")
    return found[0] if found else None


def settings_in(path: str) -> dict:
    """The settings object of the file: a report's ``settings``, or the file's object itself."""
    doc = read_json(path, "config file", UsageError, WANTS)
    if isinstance(doc, dict) and "format" in doc:
        if doc["format"] != FORMAT:
            raise UsageError(f"config file '{path}' is a {str(doc['format'])[:40]!r} document; give {WANTS}")
        doc = doc.get("settings")
    if not isinstance(doc, dict):
        raise UsageError(f"config file '{path}' holds no settings object; give {WANTS}")
    return doc


def config_words(path: str) -> list[str]:
    """The command-line words of the file's settings, each checked by its flag's parser."""
    words = []
    for key, value in settings_in(path).items():
        setting = BY_KEY.get(key)
        if setting is None:
            raise UsageError(f"config file '{path}': unknown setting '{key}'; known: {', '.join(BY_KEY)}")
        if value is None:             # recorded as null: the default
            continue
        wrong_type = (isinstance(value, bool) and bool not in setting.types) or not isinstance(value, setting.types)
        if wrong_type or (isinstance(value, list) and not all(isinstance(v, str) for v in value)):
            wanted = " or ".join("a list of names" if t is list else t.__name__ for t in setting.types)
            raise UsageError(f"config file '{path}': setting '{key}' is {value!r:.40}; give {wanted} (or null for "
                             "the default)")
        given = setting.words(value)
        try:
            parser().parse_args(given)
        except UsageError as e:
            raise UsageError(f"config file '{path}': setting '{key}': {e}") from None
        words += given
    return words


def with_config(argv: list[str]) -> list[str]:
    """``argv`` with the --config file's settings before it (none: ``argv`` as is)."""
    path = config_path_in(argv)
    return argv if path is None else config_words(path) + argv
