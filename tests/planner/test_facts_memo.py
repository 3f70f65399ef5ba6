"""planner.facts_memo: what planning keeps per GraphFacts."""
import gc
import weakref

import numpy as np
import pytest

from planner import facts_memo
from planner.facts import GraphFacts
from zoo import small


def _facts():
    return GraphFacts(small.lstm(batch=2, steps=2, features=4, hidden=4, layers=1, classes=3))


def test_made_once_per_facts_and_key_and_shared_read_only():
    a, b = _facts(), _facts()
    calls = []

    def make():
        calls.append(1)
        return np.arange(3), 7
    first = facts_memo.memo(a, ("k",), make)
    assert facts_memo.memo(a, ("k",), make) is first and len(calls) == 1
    facts_memo.memo(a, ("other",), make)
    facts_memo.memo(b, ("k",), make)
    assert len(calls) == 3
    with pytest.raises(ValueError):
        first[0][0] = 1                      # every caller shares it


def test_what_is_kept_goes_with_the_facts():
    facts = _facts()
    kept = np.zeros(4)
    facts_memo.memo(facts, ("k",), lambda: kept)
    gone = weakref.ref(facts)
    del facts
    gc.collect()
    assert gone() is None and all(v is not kept for d in facts_memo._KEPT.values() for v in d.values())
