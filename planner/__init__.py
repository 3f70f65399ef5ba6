"""Planning: policies (one module each, behind ``planner.policy``), graph facts, the budget,
size-class allocations, the swap planner, the verifier and the simulator."""
from . import policies  # noqa: F401  (registers the built-in policies)
