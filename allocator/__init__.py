"""How an arena is carved. Today: the size-class allocator of SwapAdvisor, (CLS, CNT)
allocations over plain byte sizes (``size_classes``), fitting them to a byte budget
(``fitting``), and their layout as objects at offsets in one arena (``size_class_layout``),
which a Program's ``Arena`` records as byte ranges. Knows nothing of what a tensor means;
docs/architecture.md says how another allocator plugs in.

Every allocator name a policy may be asked to use is a record in ``registry`` (its kinds:
size classes, chunked, online; its summary; where a budget's least comes from): ``auto`` and
``pool`` are registered there, the online allocators (``online``: placed request by request in
program order) by being imported here: ``bestfit`` (best fit with caching) and ``va``
(``virtual_chunks``; to a size-class policy, the chunk class of a chunked allocation)."""
from allocator import registry  # noqa: F401  (auto, pool)
from allocator import bestfit as _bestfit  # noqa: F401  (registers "bestfit")
from allocator import virtual_chunks as _virtual_chunks  # noqa: F401  (registers "va")
from allocator import unrestricted_classes as _unrestricted  # noqa: F401  (Figure 9c's mapping, for from_dict)
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
