"""What planning derives from a graph's facts and keeps for reuse: per ``GraphFacts`` and key,
made once (``memo``), gone with the facts. A budget ladder, checkpoint's segmentations and a
search plan one graph at many budgets and candidates; what depends on none of those is kept here
(allocation tables, segmentations, a search's chunked allocation). Arrays made here are shared
by every caller, so they are read-only."""
from __future__ import annotations

import weakref

import numpy as np

_KEPT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def memo(facts, key: tuple, make):
    """``make()`` once per ``facts`` and ``key``; the arrays it returns (alone or in a tuple) read-only."""
    kept = _KEPT.setdefault(facts, {})
    if key not in kept:
        made = make()
        for a in made if isinstance(made, tuple) else (made,):
            if isinstance(a, np.ndarray):
                a.setflags(write=False)
        kept[key] = made
    return kept[key]
