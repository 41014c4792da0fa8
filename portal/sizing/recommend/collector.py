"""The garbage collector paused while searches run.

A search allocates tens of thousands of objects without cycles (memory estimates, memo keys)
that reference counting frees; the collector's passes over them, and over the searchers kept
between requests (memo.py), took about a fifth of a request (docs/sizing.md, "Recommender
speed"). The collector's switch is process-wide, so concurrent searches share one pause: the
first to start turns it off, the last to finish turns it back on (if it was on), and a
collection another thread needs meanwhile happens then.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_pause = {"searches": 0, "was_enabled": False}


@contextmanager
def collections_paused() -> Iterator[None]:
    with _lock:
        if not _pause["searches"]:
            _pause["was_enabled"] = gc.isenabled()
            gc.disable()
        _pause["searches"] += 1
    try:
        yield
    finally:
        with _lock:
            _pause["searches"] -= 1
            if not _pause["searches"] and _pause["was_enabled"]:
                gc.enable()
