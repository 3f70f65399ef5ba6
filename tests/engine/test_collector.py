"""engine.collector: automatic collection held off during a planning pass, its cyclic garbage
freed at the end, and a caller's own setting left as it was."""
import gc
import weakref

from engine.collector import collector_held


class _Node:
    def __init__(self):
        self.other = None


def _cycle() -> weakref.ref:
    a, b = _Node(), _Node()
    a.other, b.other = b, a             # a cycle: only the collector frees it
    return weakref.ref(a)


def test_collection_is_off_inside_and_the_pass_garbage_is_freed_at_the_end():
    assert gc.isenabled()
    with collector_held():
        assert not gc.isenabled()
        ref = _cycle()
        assert ref() is not None        # nothing collected while held
    assert gc.isenabled()
    assert ref() is None                # the youngest generation collected on the way out


def test_a_caller_that_turned_collection_off_keeps_it_off():
    gc.disable()
    try:
        with collector_held():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_nested_holds_restore_collection_once_and_an_error_still_restores_it():
    try:
        with collector_held():
            with collector_held():
                pass
            assert not gc.isenabled()   # the inner one does not turn it back on
            raise KeyError("a refused candidate")
    except KeyError:
        pass
    assert gc.isenabled()
