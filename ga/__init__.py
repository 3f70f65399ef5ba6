"""The genetic search over schedules and allocations (SwapAdvisor Section 5).

    from ga.search import SearchOptions, search
    from planner.budget import make_budget
    from planner.facts import GraphFacts
    facts = GraphFacts(graph)
    result = search(facts, make_budget(facts, device_bytes), profile, SearchOptions(time_limit_s=60))
    result.best_schedule, result.best_allocation, result.best_time

Modules, in the order they build on each other:

- ``context``: per-graph facts computed once (successor lists, class minima).
- ``schedule_ops``: Figure 4's crossover and the dataflow-scheduler mutation.
- ``allocation_ops``: Figure 5's crossover, CLS/CNT mutation, repair to the pool's bytes.
- ``fitness``: plan + simulate; ``workers`` (``ray_workers``): the processes (Ray actors) that run it.
- ``population``: chromosomes, the first generation, children, Eq. 1 selection.
- ``history``, ``checkpoint``: the per-generation log and the saved search state.
- ``search``: the loop.

The package imports nothing on its own, so ``ga.search`` stays the module.
"""
