"""``reference``: no plan at all. The graph runs on the numpy reference interpreter, with no
budget, no backend and no swapping; it is how the engine's numerics are checked."""
from __future__ import annotations

from ..policy import Policy, register

POLICY = register(Policy("reference", "the numpy reference interpreter: no plan, no budget, no device",
                         lambda request: None, needs_budget=False, runs_program=False))
