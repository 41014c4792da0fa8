"""Deliverable first: a plan needing more nodes than are ready is on request and not ranked first
unless only it meets the goal. Stock reaches the pure recommender as data (SkuSpec.stock_nodes)."""

from dataclasses import replace

import pytest

from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.recommend import Goal, Plan, SearchOptions, Workload, recommend

WORK = Workload(model="mistral-7b", seq_len=4096, global_batch_tokens=4096 * 256, dataset_tokens=10**9,
                dataset_bytes=4 * 10**9)
OPTIONS = SearchOptions(node_counts=(1, 2, 4), top_n=20)


@pytest.fixture(scope="module")
def catalog():
    return catalog_from_seed()


def with_stock(catalog, stock: dict[str, int], default: int = 4):
    return replace(catalog, skus=tuple(replace(s, stock_nodes=stock.get(s.slug, default))
                                       for s in catalog.skus))


def test_the_best_plan_out_of_stock_comes_after_the_ready_ones(catalog):
    free = recommend(WORK, Goal("cheapest"), with_stock(catalog, {}), OPTIONS)
    first = free.best
    assert first.availability == "ready"
    rec = recommend(WORK, Goal("cheapest"), with_stock(catalog, {first.sku: 0}), OPTIONS)
    assert rec.best.sku != first.sku and rec.best.availability == "ready"
    waiting = [p for p in rec.plans if p.availability == "on-request"]
    assert waiting and all(p.sku == first.sku for p in waiting)
    assert rec.plans.index(waiting[0]) > 0
    assert any("on request" in w and "0 ready" in w for w in waiting[0].warnings)
    assert any("listed after the plans ready now" in e for e in rec.explanations)


def test_only_an_on_request_plan_meets_the_deadline_so_it_comes_first_and_says_why(catalog):
    free = recommend(WORK, Goal("fastest"), with_stock(catalog, {}), OPTIONS)
    fastest = free.best
    others = [p for p in free.points if p.sku != fastest.sku]
    deadline = fastest.train_hours * 1.0001
    assert all(p.train_hours > deadline for p in others)  # only the fastest SKU meets it
    rec = recommend(WORK, Goal("deadline", deadline_hours=deadline),
                    with_stock(catalog, {fastest.sku: fastest.nodes - 1}), OPTIONS)
    assert rec.goal_met and rec.best.sku == fastest.sku and rec.best.availability == "on-request"
    assert any("only it meets your deadline" in e for e in rec.explanations)


def test_unknown_stock_changes_nothing_and_older_plans_read_back(catalog):
    rec = recommend(WORK, Goal("cheapest"), catalog, OPTIONS)
    assert rec.best.availability == "unknown"
    stored = rec.best.to_dict()
    del stored["availability"]  # a plan stored before availability existed
    assert Plan.from_dict(stored).availability == "unknown"
