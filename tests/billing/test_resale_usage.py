"""A reseller's customer reads its own usage at the reseller's selling prices (its markup on the
ledger's rates); the reseller and staff read the ledger, and the reseller is invoiced at its cost."""

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from portal.billing import invoices
from portal.billing.models import Invoice
from portal.billing.selectors import month_of, order_summary, price_basis
from portal.billing.services import usage_sync
from portal.catalog.pricing import PriceList
from portal.catalog.services import resale_prices_set
from portal.core.units import usd
from portal.orders.states import OrderState
from tests.api.conftest import key_client
from tests.factories import L4_SKU, make_order, member_of

D = Decimal
MARCH = month_of(datetime(2026, 3, 1, tzinfo=UTC))
SMALL = {"sku": L4_SKU, "network": "eth-1g", "nvme": "nvme-1tb-single"}
HOURS = 5


@pytest.fixture
def march(catalog, people):
    """The customer's order ran 5 h in March 2026; its reseller charges 30 % over cost on the L4
    server (25 % on everything else)."""
    order = make_order(people.client_org, state=OrderState.ACTIVE, **SMALL)
    start = datetime(2026, 3, 4, 10, tzinfo=UTC)
    usage_sync(order=order, nodes={1: "gpu-1"}, storage=False, at=start, cause="t")
    usage_sync(order=order, nodes={}, storage=False, at=start + timedelta(hours=HOURS), cause="t")
    resale_prices_set(reseller=people.reseller, percent="25", items={f"sku:{L4_SKU}": "30"})
    return order


def _selling_hourly(order) -> Decimal:
    return PriceList(percent=D("30")).unit(f"sku:{L4_SKU}", order.price_hourly)


def test_the_price_basis_depends_on_who_looks(march, people):
    carol = member_of(people.client_org, username="carol")
    assert price_basis(carol, people.client_org).percent_for(f"sku:{L4_SKU}") == D("30")
    for viewer in (people.rita, people.sam, member_of(people.reseller, username="max")):
        assert price_basis(viewer, people.client_org) is None
    assert price_basis(people.alice, people.acme) is None


def test_the_customers_billing_page_shows_the_selling_prices(march, people, login):
    selling = _selling_hourly(march) * HOURS
    cost = march.price_hourly * HOURS
    assert selling > cost
    html = login(member_of(people.client_org, username="carol")).get(
        f"/billing/{people.client_org.slug}/?month=2026-03").content.decode()
    assert usd(selling) in html and usd(cost) not in html
    reseller_html = login(people.rita).get(
        f"/billing/{people.client_org.slug}/?month=2026-03").content.decode()
    assert usd(cost) in reseller_html and usd(selling) not in reseller_html


def test_the_order_cost_card_shows_the_selling_prices(march, people, login):
    carol = member_of(people.client_org, username="carol")
    summary = order_summary(march, at=MARCH.end - timedelta(seconds=1),
                            markup=price_basis(carol, people.client_org))
    assert summary.lifetime == _selling_hourly(march) * HOURS
    html = login(carol).get(f"/orders/{march.reference}/").content.decode()
    assert f'<strong id="cost-lifetime">{usd(_selling_hourly(march) * HOURS)}</strong>' in html
    html = login(people.rita).get(f"/orders/{march.reference}/").content.decode()
    assert f'<strong id="cost-lifetime">{usd(march.price_hourly * HOURS)}</strong>' in html


def test_the_api_answers_the_customers_key_at_selling_prices(march, people):
    mine = key_client(people.client_org).get("/api/v1/usage?month=2026-03").json()
    assert D(mine["cost_so_far"]) == _selling_hourly(march) * HOURS
    by_order = key_client(people.client_org).get(f"/api/v1/usage?month=2026-03&order={march.reference}")
    assert D(by_order.json()["cost_so_far"]) == _selling_hourly(march) * HOURS
    resellers = key_client(people.reseller).get(
        f"/api/v1/usage?month=2026-03&customer={people.client_org.slug}").json()
    assert D(resellers["cost_so_far"]) == march.price_hourly * HOURS


def test_the_reseller_is_still_invoiced_at_its_cost(march, people):
    invoices.month_close(period=MARCH, now=datetime(2026, 4, 2, tzinfo=UTC))
    invoice = Invoice.objects.get(organisation=people.reseller)
    assert invoice.subtotal == march.price_hourly * HOURS


def test_the_statement_to_rebill_is_at_the_selling_prices(march, people, login):
    rows = login(people.rita).get(
        f"/billing/{people.client_org.slug}/statement.csv?month=2026-03").content.decode().splitlines()
    assert rows[-1].split(",")[5] == str(_selling_hourly(march) * HOURS)


def test_the_order_page_prices_the_order_as_its_usage_is_priced(march, people, login):
    html = login(member_of(people.client_org, username="carol")).get(
        f"/orders/{march.reference}/").content.decode()
    price = re.search(r'<p class="price-now"><span class="stat">(.*?)</span>', html).group(1)
    assert price == usd(_selling_hourly(march))
    assert "At GPU Resale's prices for you." in html
    html = login(people.rita).get(f"/orders/{march.reference}/").content.decode()
    price = re.search(r'<p class="price-now"><span class="stat">(.*?)</span>', html).group(1)
    assert price == usd(march.price_hourly)


def test_the_resellers_billing_page_shows_each_customers_cost_price_and_margin(march, people, login):
    html = login(people.rita).get(f"/billing/{people.reseller.slug}/?month=2026-03").content.decode()
    row = re.search(r'<table class="table titled" id="customer-table">.*?</table>', html, re.S).group(0)
    cost, selling = march.price_hourly * HOURS, _selling_hourly(march) * HOURS
    labels = "Your cost so far|They pay so far|Your margin"
    cells = re.findall(rf'data-label="({labels})" class="num">([^<]*)<', row)
    assert cells == [("Your cost so far", usd(cost)), ("They pay so far", usd(selling)),
                     ("Your margin", usd(selling - cost))]


def test_the_order_list_prices_a_customers_orders_at_the_selling_price(march, people, login):
    second = make_order(people.client_org, state=OrderState.ACTIVE, **SMALL)
    html = login(member_of(people.client_org, username="carol")).get("/orders/").content.decode()
    prices = re.findall(r'<td data-label="Price" class="num">([^<]*)</td>', html)
    assert prices == [f"{usd(_selling_hourly(second))}/h", f"{usd(_selling_hourly(march))}/h"]
    html = login(people.rita).get(f"/orders/?customer={people.client_org.slug}").content.decode()
    prices = re.findall(r'<td data-label="Price" class="num">([^<]*)</td>', html)
    assert prices == [f"{usd(second.price_hourly)}/h", f"{usd(march.price_hourly)}/h"]
