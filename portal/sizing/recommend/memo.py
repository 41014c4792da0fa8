"""Searchers kept between requests, one per workload shape.

What a Searcher memoises (memory estimates and the fit decisions made from them, each world
size's layouts in bound order, communication floors) depends on the model, the workload's shape
(everything but how many tokens it trains on and the data it reads), the search options, the
catalog's stacks and its GPUs; not on the goal, prices or stock. A server meets the same shapes
again and again (the presets; a customer changing the goal, the dataset or the budget), so each
process keeps the searchers of its last MAX_KEPT shapes. A request takes its shape's searcher out
while it searches, so no two requests share one (the second builds its own), and puts it back;
the step times, which depend on the tokens, are worked out again per request (Searcher.begin).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields

from portal.sizing.estimator import ModelSpec

from .search import Searcher
from .types import SearchOptions, Workload

MAX_KEPT = 8  # shapes per process; a searcher of a 70B model on the seeded catalog holds a few MB

_lock = threading.Lock()
_kept: OrderedDict[tuple, Searcher] = OrderedDict()


# what only sets the tokens to train and the data to read: no memo depends on it
DATA_FIELDS = frozenset({"dataset_tokens", "dataset_bytes", "dataset_files", "epochs", "train_tokens"})


def shape_of(workload: Workload) -> tuple:
    """The workload's other fields, by name."""
    return tuple((f.name, getattr(workload, f.name)) for f in fields(workload) if f.name not in DATA_FIELDS)


@contextmanager
def searcher_for(model: ModelSpec, workload: Workload, options: SearchOptions, stacks: tuple,
                 gpus: tuple) -> Iterator[Searcher]:
    """This shape's searcher (kept or new), started for ``workload``; kept again afterwards
    unless the search failed unexpectedly."""
    key = (shape_of(workload), model, options, stacks, gpus)
    with _lock:
        searcher = _kept.pop(key, None)
    if searcher is None:
        searcher = Searcher(model, workload, options, stacks)
    else:
        searcher.begin(workload)
    try:
        yield searcher
    except ValueError:  # an answer ("nothing fits"): every memo entry written is whole
        _keep(key, searcher)
        raise
    else:
        _keep(key, searcher)


def _keep(key: tuple, searcher: Searcher) -> None:
    with _lock:
        _kept[key] = searcher
        while len(_kept) > MAX_KEPT:
            _kept.popitem(last=False)


def forget_searches() -> None:
    """Drop every kept searcher (a cold start, for benchmarks and tests)."""
    with _lock:
        _kept.clear()
