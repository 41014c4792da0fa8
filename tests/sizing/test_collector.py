"""The collector paused during searches: process-wide, so overlapping searches share one pause."""

import gc

import pytest

from portal.sizing.recommend.collector import collections_paused


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_a_search_pauses_the_collector_and_turns_it_on_again(collector_on):
    with collections_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_overlapping_searches_leave_it_off_until_the_last_ends(collector_on):
    """A starts, B starts, A ends (before the fix B had seen it off and never turned it on)."""
    first, second = collections_paused(), collections_paused()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert not gc.isenabled()
    second.__exit__(None, None, None)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    was = gc.isenabled()
    gc.disable()
    try:
        with collections_paused():
            pass
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


def test_a_failing_search_turns_it_on_again(collector_on):
    with pytest.raises(RuntimeError), collections_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
