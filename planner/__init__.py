"""Planning: policies (one module each, behind ``planner.policy``), graph facts, the budget,
size-class allocations, the swap planner, the verifier and the simulator."""
from .numba_cache import register as _register_numba_cache

_register_numba_cache()     # before any compiled module: one cache per user (planner/numba_cache.py)

from . import policies  # noqa: E402,F401  (registers the built-in policies)
