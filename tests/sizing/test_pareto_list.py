"""The wizard's plans and "Alternatives on the Pareto front" (issue 29, item 14): no alternative is
both slower and dearer than the chosen plan, and no plan shows twice."""

import re

import pytest

from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.recommend import Goal, SearchOptions, recommend
from tests.sizing.test_recommend import full_7b

DELTA = re.compile(r"\((?P<dt>[+−])[^,]*, (?P<dc>[+−])")


@pytest.fixture(scope="module")
def catalog():
    return catalog_from_seed()


@pytest.mark.parametrize("goal", [Goal("cheapest"), Goal("fastest"), Goal("deadline", deadline_hours=5),
                                  Goal("budget", budget_usd=500)])
def test_no_alternative_is_slower_and_dearer_and_nothing_shows_twice(catalog, goal):
    rec = recommend(full_7b(), goal, catalog, SearchOptions(top_n=5))
    assert rec.alternatives
    for text in rec.alternatives:
        delta = DELTA.search(text)
        assert delta, text
        assert (delta["dt"], delta["dc"]) != ("+", "+"), text
    assert len(set(rec.alternatives)) == len(rec.alternatives)
    shown = [(p.sku, p.nodes, p.network, p.strategy, p.tp, p.pp, p.micro_batch, p.checkpointing)
             for p in rec.plans]
    assert len(set(shown)) == len(shown)
