"""The planner's user-facing error."""
from engine.errors import EngineError


class PlanError(EngineError, ValueError):
    """The budget or allocation cannot run the graph; the message names the operator."""
