"""Priced as billed: started hours per node over provisioning and training, the monthly rate
when cheaper, cost per month for multi-week jobs (portal.sizing.recommend.pricing.job_price)."""

import pytest

from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.recommend import Goal, SearchOptions, Workload, recommend
from portal.sizing.recommend.pricing import HOURS_PER_MONTH, PROVISIONING_HOURS, job_price


def test_started_hours_are_billed_including_provisioning():
    price = job_price(hourly_usd=10.0, monthly_usd=7000.0, train_hours=2.2)
    assert price.billed_hours == 4  # 2.2 h training + 1 h provisioning, started hours
    assert price.total_usd == 40.0 and price.billing == "hourly" and price.per_month_usd is None
    assert job_price(hourly_usd=10.0, monthly_usd=7000.0, train_hours=2.0).billed_hours == 3


def test_the_monthly_rate_when_it_is_cheaper_and_cost_per_month_for_multi_week_jobs():
    long = job_price(hourly_usd=10.0, monthly_usd=5000.0, train_hours=700.0)
    assert long.billed_hours == 701 and long.hourly_total_usd == 7010.0
    assert long.billing == "monthly" and long.total_usd == 5000.0 and long.per_month_usd == 5000.0
    weeks = job_price(hourly_usd=10.0, monthly_usd=9000.0, train_hours=24 * 21)
    assert weeks.billing == "hourly"
    months = weeks.billed_hours / float(HOURS_PER_MONTH)
    assert weeks.per_month_usd == pytest.approx(weeks.total_usd / months)


def test_cost_never_falls_as_the_job_gets_longer():
    last = 0.0
    for tenth in range(0, 20000, 7):
        cost = job_price(hourly_usd=3.1, monthly_usd=1900.0, train_hours=tenth / 10).total_usd
        assert cost >= last
        last = cost


@pytest.mark.parametrize("hours", [-1.0, float("nan"), float("inf")])
def test_bad_hours_are_refused(hours):
    with pytest.raises(ValueError, match="train_hours"):
        job_price(hourly_usd=1.0, monthly_usd=1.0, train_hours=hours)


def test_recommended_plans_are_priced_as_billed():
    catalog = catalog_from_seed()
    work = Workload(model="llama-3.1-8b", seq_len=4096, global_batch_tokens=4096 * 256, dataset_tokens=10**9)
    rec = recommend(work, Goal("cheapest"), catalog, SearchOptions(top_n=5))
    for plan in rec.plans:
        sku = catalog.sku(plan.sku)
        assert plan.billed_hours >= plan.train_hours + PROVISIONING_HOURS
        assert plan.billed_hours < plan.train_hours + PROVISIONING_HOURS + 1
        expected = job_price(hourly_usd=plan.price_hourly_usd, monthly_usd=10**9,
                             train_hours=plan.train_hours).total_usd
        if plan.billing == "hourly":
            assert plan.price_total_usd == pytest.approx(expected, rel=1e-6)
        assert sku.price_hourly_usd * plan.nodes <= plan.price_hourly_usd


def test_honest_alternatives_show_each_other_gpu_family_with_price_and_time():
    catalog = catalog_from_seed()
    work = Workload(model="llama-3.1-8b", seq_len=4096, global_batch_tokens=4096 * 256, dataset_tokens=10**9)
    rec = recommend(work, Goal("cheapest"), catalog)
    families = {p.gpu for p in rec.points} - {rec.best.gpu}
    assert {p.gpu for p in rec.other_gpus} == families and len(families) > 3
    prices = [p.price_total_usd for p in rec.other_gpus]
    assert prices == sorted(prices)
    for point in rec.other_gpus:  # each is that family's cheapest
        assert point.price_total_usd == min(p.price_total_usd for p in rec.points if p.gpu == point.gpu)
        sku_name = catalog.sku(point.sku).name
        assert any(line.startswith("On ") and sku_name in line for line in rec.alternatives)
    assert rec.to_dict()["other_gpus"][0]["train_hours"] > 0


def test_the_search_s_quick_total_is_the_billed_total():
    from portal.sizing.recommend.pricing import billed_total_usd

    for hours in (0.0, 0.5, 1.0, 2.2, 100.0, 700.0, 729.0, 1500.0, 5000.0):
        for monthly in (0.0, 1900.0, 5000.0):
            full = job_price(hourly_usd=7.3, monthly_usd=monthly, train_hours=hours).total_usd
            assert billed_total_usd(7.3, monthly, hours) == full
