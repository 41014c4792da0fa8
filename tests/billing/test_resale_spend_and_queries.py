"""A reseller's customer's spend limit counts at the selling prices its usage shows it (the
reseller's own limit at its cost); an order page with a markup reads the order's meter keys
once, and the reseller's billing page each customer's month in one read."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from portal.billing import spend
from portal.catalog.pricing import PriceList
from portal.catalog.services import resale_prices_set
from tests.factories import L4_SKU, OrganisationFactory, member_of, metered_order, verified_login

D = Decimal
SMALL = {"sku": L4_SKU, "network": "eth-1g", "nvme": "nvme-1tb-single"}
MARCH_2 = datetime(2026, 3, 2, tzinfo=UTC)


def _ran(org, hours, *, start=MARCH_2, **quote):
    return metered_order(org, hours, start=start, **(quote or SMALL))


def test_a_reseller_customers_thresholds_fire_at_its_selling_prices(catalog, people, queued):
    """10 h at cost is 45 % of the limit; at the reseller's +20 % it is 54 %: the 50 % alert fires."""
    resale_prices_set(reseller=people.reseller, customer=people.client_org, percent="20", items={})
    order = _ran(people.client_org, 10)
    selling = PriceList(percent=D("20")).unit(f"sku:{L4_SKU}", order.price_hourly) * 10
    limit = (order.price_hourly * 10 / D("0.45")).quantize(D("0.01"))
    assert order.price_hourly * 10 * 100 < limit * 50 <= selling * 100
    spend.spend_limit_set(organisation=people.client_org, monthly_usd=limit)
    assert spend.month_spend(people.client_org, at=datetime(2026, 3, 20, tzinfo=UTC)) == selling
    assert spend.spend_check(organisation=people.client_org, at=datetime(2026, 3, 20, tzinfo=UTC)) == [50]


def test_the_resellers_own_limit_counts_at_its_cost(catalog, people, queued):
    resale_prices_set(reseller=people.reseller, percent="20", items={})
    order = _ran(people.reseller, 10)
    assert spend.month_spend(people.reseller, at=datetime(2026, 3, 20, tzinfo=UTC)) == order.price_hourly * 10


def test_the_customers_billing_page_shows_its_limit_at_its_prices(catalog, people, queued):
    resale_prices_set(reseller=people.reseller, customer=people.client_org, percent="20", items={})
    order = _ran(
        people.client_org,
        10,
        start=datetime.now(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0),
    )
    spend.spend_limit_set(organisation=people.client_org, monthly_usd=D("1000"))
    selling = PriceList(percent=D("20")).unit(f"sku:{L4_SKU}", order.price_hourly) * 10
    carol = verified_login(Client(), member_of(people.client_org, username="carol"))
    html = carol.get(f"/billing/{people.client_org.slug}/").content.decode()
    assert f"${selling:,.2f} of $1,000.00 this month" in html
    rita = verified_login(Client(), people.rita).get(f"/billing/{people.client_org.slug}/").content.decode()
    assert f"${selling:,.2f} of $1,000.00 this month" in rita  # the limit is the customer's, at its prices


def _key_reads(queries) -> list[str]:
    return [
        q["sql"]
        for q in queries
        if '"catalog_storageprovider"."slug" AS "storage_provider__slug"' in q["sql"]
    ]


@pytest.mark.parametrize("page", ["", "server/"])
def test_an_order_page_with_a_markup_reads_the_meter_keys_once(catalog, people, page):
    resale_prices_set(reseller=people.reseller, customer=people.client_org, percent="20", items={})
    order = _ran(people.client_org, 3, start=datetime.now(UTC) - timedelta(minutes=30))
    order.plan = {**order.plan, "train_hours": 10}
    order.save(update_fields=["plan"])
    carol = verified_login(Client(), member_of(people.client_org, username="carol"))
    with CaptureQueriesContext(connection) as queries:
        response = carol.get(f"/orders/{order.reference}/{page}")
    assert response.status_code == 200
    assert len(_key_reads(queries.captured_queries)) == 1, _key_reads(queries.captured_queries)


def test_the_resellers_billing_page_reads_its_customers_month_once(catalog, people):
    resale_prices_set(reseller=people.reseller, percent="20", items={})
    now = datetime.now(UTC)
    for n in range(3):
        child = OrganisationFactory(name=f"Child {n}", slug=f"child-{n}", parent=people.reseller)
        _ran(child, 2, start=now - timedelta(minutes=30))
    rita = verified_login(Client(), people.rita)
    with CaptureQueriesContext(connection) as queries:
        html = rita.get(f"/billing/{people.reseller.slug}/").content.decode()
    reads = [q["sql"] for q in queries.captured_queries if 'FROM "billing_usageinterval"' in q["sql"]]
    assert len(reads) == 2, reads  # the reseller's own month, and its customers' months
    assert all(f"Child {n}" in html for n in range(3))
