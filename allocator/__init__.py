"""How an arena is carved. Today: the size-class allocator of SwapAdvisor, (CLS, CNT)
allocations over plain byte sizes (``size_classes``), fitting them to a byte budget
(``fitting``), and their layout as objects at offsets in one arena (``size_class_layout``),
which a Program's ``Arena`` records as byte ranges. Knows nothing of what a tensor means;
docs/architecture.md says how another allocator plugs in.

Online allocators (``online``: placed request by request in program order) register here by
being imported: ``bestfit`` (best fit with caching) and ``va`` (``virtual_chunks``)."""
from allocator import bestfit as _bestfit  # noqa: F401  (registers "bestfit")
from allocator import virtual_chunks as _virtual_chunks  # noqa: F401  (registers "va")
from allocator.fitting import (AllocationDoesNotFit, fit_to_budget, merge_classes_to_fit, random_allocation,
                              repair_cnt)
from allocator.size_class_layout import PlacedLayout, SizeClassLayout
from allocator.size_classes import (ALIGNMENT, Allocation, aligned_bytes, cls_problem,
                                    counts_from_extended, distinct_sizes, extended_counts,
                                    repair_cls)

__all__ = ["ALIGNMENT", "Allocation", "AllocationDoesNotFit", "PlacedLayout", "SizeClassLayout", "aligned_bytes",
           "cls_problem", "counts_from_extended", "distinct_sizes", "extended_counts",
           "fit_to_budget", "merge_classes_to_fit", "random_allocation",
           "repair_cls", "repair_cnt"]
