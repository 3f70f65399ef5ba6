"""One numba cache per user for the engine's compiled code, whichever copy of the code is imported.

numba keeps a function's compiled code beside its source (``__pycache__``) or, with
NUMBA_CACHE_DIR, in a folder named after the source's absolute path: either way a second copy of
the code (a clone and its pip-installed copy, or a user's script that imports the installed one)
compiles everything again, minutes on a small machine (issue 38). numba stamps each cache entry
with the hash of its source file's content and keys it by the CPU it was compiled for, so copies
with the same source can share entries: this locator files ours under the user's cache directory
by the module's folder inside the project (``planner/swap_scan.py`` ->
``~/.cache/swapengine/numba/planner``). A NUMBA_CACHE_DIR the user set wins; where the folder cannot
be written, or this numba stamps by modification time instead, numba's own locators are used.

``register()`` must run before a module's ``numba.njit(cache=True)`` decorators: ``planner`` and
``ga`` call it first thing in their ``__init__``.
"""
from __future__ import annotations

import os

from engine.user_cache import CODE_ROOT as ROOT
from engine.user_cache import own_numba_cache_dir as user_cache_dir

PACKAGES = ("planner", "ga", "engine", "allocator", "ops")


def _package_dir(py_file: str) -> str | None:
    """``py_file``'s folder relative to ROOT when it lies in one of PACKAGES, else None."""
    rel = os.path.relpath(os.path.dirname(os.path.abspath(py_file)), ROOT)
    return rel if rel.split(os.sep)[0] in PACKAGES else None


def _locator_class():
    from numba.core import caching, config

    class PackageCacheLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
        def __init__(self, py_func, py_file, package_dir: str):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._cache_path = os.path.join(user_cache_dir(), package_dir)

        def get_cache_path(self):
            return self._cache_path

        @classmethod
        def from_function(cls, py_func, py_file):
            package_dir = _package_dir(py_file)
            if config.CACHE_DIR or package_dir is None or not os.path.exists(py_file):
                return None
            self = cls(py_func, py_file, package_dir)
            try:
                self.ensure_cache_path()
            except OSError:          # not writable: numba's own locators then
                return None
            return self

    return PackageCacheLocator


_registered = None


def register() -> bool:
    """Put the locator first among numba's (once); False where this numba cannot share entries
    between copies safely (no content stamp) or its caching internals moved."""
    global _registered
    if _registered is not None:
        return _registered
    try:
        from numba.core import caching
        classes = caching.CacheImpl._locator_classes
        content_stamped = hasattr(caching, "_hash_source_file")
        locator = _locator_class() if content_stamped else None
    except (ImportError, AttributeError):
        locator = None
    if locator is not None:
        classes.insert(0, locator)
    _registered = locator is not None
    return _registered
