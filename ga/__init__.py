"""The genetic search over schedules and allocations (SwapAdvisor Section 5).

    from ga.search import SearchOptions, search
    result = search(graph, budget_bytes, profile, SearchOptions(time_limit_s=60))
    result.best_schedule, result.best_allocation, result.best_time

Modules, in the order they build on each other:

- ``context``: per-graph facts computed once (successor lists, class minima).
- ``schedule_ops``: Figure 4's crossover and the dataflow-scheduler mutation.
- ``allocation_ops``: Figure 5's crossover, CLS/CNT mutation, repair to the budget.
- ``fitness``: plan + simulate, and the worker pool that runs it.
- ``population``: chromosomes, the first generation, children, Eq. 1 selection.
- ``history``, ``checkpoint``: the per-generation log and the saved search state.
- ``search``: the loop.

The package imports nothing on its own, so ``ga.search`` stays the module.
"""
