"""allocator/registry.py: the one place allocator names live, and what each offers a policy."""
import pytest

from allocator import registry
from allocator.registry import CHUNKED, ONLINE, SIZE_CLASSES, UnknownAllocator


def test_each_name_offers_its_kinds_and_a_policy_gets_the_first_it_accepts():
    assert registry.kinds_for("pool", (SIZE_CLASSES,)) == (SIZE_CLASSES,)
    assert registry.kinds_for("va", (ONLINE,)) == (ONLINE,)                       # 001's chunks
    assert registry.kinds_for("va", (SIZE_CLASSES, CHUNKED)) == (CHUNKED,)         # swapadvisor's chunk class
    assert registry.kinds_for("bestfit", (SIZE_CLASSES,)) == ()


def test_auto_is_for_a_policy_that_takes_all_its_kinds():
    assert registry.kinds_for("auto", (SIZE_CLASSES, CHUNKED)) == (SIZE_CLASSES, CHUNKED)
    assert registry.kinds_for("auto", (SIZE_CLASSES,)) == ()


def test_a_policys_allocators_follow_registration_order_default_first():
    assert registry.accepted_by((SIZE_CLASSES, CHUNKED))[0] == "auto"
    assert registry.accepted_by((SIZE_CLASSES,)) == ["pool"]
    assert registry.accepted_by((ONLINE,)) == registry.of_kind(ONLINE) and "bestfit" in registry.of_kind(ONLINE)


def test_the_budget_rule_is_exact_only_for_the_size_class_minimum():
    assert registry.smallest_is_exact(["pool"]) and registry.smallest_is_exact(["auto"])
    assert not registry.smallest_is_exact(["bestfit"]) and not registry.smallest_is_exact(["va"])


def test_options_are_checked_against_the_factory_in_one_line():
    assert registry.takes_option("va", "chunk_bytes") and registry.takes_option("auto", "chunk_bytes")
    assert not registry.takes_option("pool", "chunk_bytes")
    registry.check_options("va", chunk_bytes=64 << 10)
    with pytest.raises(UnknownAllocator, match="'pool' takes no options"):
        registry.check_options("pool", chunk_bytes=4096)
    with pytest.raises(UnknownAllocator, match="does not take those parameters"):
        registry.check_options("va", pages=3)
    with pytest.raises(UnknownAllocator, match=r"unknown allocator 'nope' \(choose from auto, pool"):
        registry.get("nope")


def test_a_record_must_be_consistent():
    with pytest.raises(ValueError, match="kinds must be among"):
        registry.Allocator("x", ("magic",), "no such kind")
    with pytest.raises(ValueError, match="has a factory"):
        registry.Allocator("x", (ONLINE,), "an online allocator without a factory")
