"""The planner's user-facing error."""
from engine.errors import EngineError


class PlanError(EngineError, ValueError):
    """The budget or allocation cannot run the graph; the message names the operator."""


class OutOfRoom(PlanError):
    """A policy found no room for a tensor under the budget, where a larger budget may run it
    (its smallest budget is not known beforehand: an online allocator fragments, a policy keeps
    some tensors resident). Without --memory the budget grows until every policy runs
    (``planner.budget.smallest_that_plans``)."""
