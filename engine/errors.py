"""The one base class of errors a person can act on.

Every error the engine raises for bad input (a flag, a model name, a budget too small, a
malformed profile, plan or checkpoint, a missing GPU) derives from ``EngineError``; its
message says what is wrong, where, and what would work, in one line. The command line
catches this one type and exits with status 2; anything else is a bug and keeps its
traceback.
"""


class EngineError(Exception):
    """A user-facing error: the message is the whole report."""


class UsageError(EngineError):
    """A bad flag or value (a model name, a size): reported as one line, exit status 2."""


class ModelImportError(EngineError):
    """A model that cannot be imported (engine.importer) or an imported model's folder that
    cannot be read: one line naming the file, operator or node, and what would work."""
