"""GET /api/v1/usage: an organisation's month, one order's, a reseller's customer's; tenancy."""

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from portal.billing.selectors import month_of
from portal.billing.services import usage_sync
from portal.orders.states import OrderState
from tests.api.conftest import assert_problem, key_client
from tests.factories import L4_SKU, make_order

SMALL = {"sku": L4_SKU, "network": "eth-1g", "nvme": "nvme-1tb-single"}


def _running(org, hours: int):
    """An active order billed since ``hours`` and 10 minutes ago (since the month began, in a
    month younger than that)."""
    order = make_order(org, state=OrderState.ACTIVE, **SMALL)
    now = timezone.now().astimezone(UTC)
    start = max(now - timedelta(hours=hours, minutes=10), month_of(now).start)
    usage_sync(order=order, nodes={41: "gpu-0041"}, storage=False, at=start, cause="hand-over")
    order.billed_from = start
    return order


@pytest.fixture
def usage_world(catalog, people):
    return _running(people.acme, 2), _running(people.outsider_org, 1)


def test_an_organisations_month(usage_world, people):
    mine, _ = usage_world
    body = key_client(people.acme).get("/api/v1/usage").json()
    assert body["organisation"] == "acme-ai" and body["currency"] == "USD"
    assert body["month"] == f"{timezone.now().astimezone(UTC):%Y-%m}"
    [order] = body["orders"]
    assert order["order"] == mine.reference
    started = math.ceil((datetime.fromisoformat(body["as_of"]) - mine.billed_from) / timedelta(hours=1))
    assert started == 3 or mine.billed_from == month_of(mine.billed_from).start  # 2 h 10 min
    assert Decimal(order["cost_so_far"]) == started * mine.price_hourly
    assert Decimal(body["cost_so_far"]) == Decimal(order["cost_so_far"])
    assert Decimal(body["forecast"]) >= Decimal(body["cost_so_far"])
    [meter] = order["meters"]
    assert (meter["kind"], meter["label"], meter["running"], meter["billed_hours"]) == (
        "node", "gpu-0041", True, started)


def test_one_order_and_another_tenants_order_is_a_404(usage_world, people):
    mine, theirs = usage_world
    client = key_client(people.acme)
    body = client.get("/api/v1/usage", {"order": mine.reference}).json()
    assert [o["order"] for o in body["orders"]] == [mine.reference]
    assert_problem(client.get("/api/v1/usage", {"order": theirs.reference}), 404)
    assert_problem(client.get("/api/v1/usage", {"customer": people.outsider_org.slug}), 404)


def test_a_reseller_reads_its_customers_usage_the_customer_not_the_resellers(catalog, people):
    child_order = _running(people.client_org, 1)
    reseller = key_client(people.reseller)
    body = reseller.get("/api/v1/usage", {"customer": people.client_org.slug}).json()
    assert [o["order"] for o in body["orders"]] == [child_order.reference]
    child = key_client(people.client_org)
    assert_problem(child.get("/api/v1/usage", {"customer": people.reseller.slug}), 404)


def test_bad_months_are_refused_with_a_reason(catalog, people):
    client = key_client(people.acme)
    body = assert_problem(client.get("/api/v1/usage", {"month": "2026-13"}), 400)
    assert "YYYY-MM" in str(body)
    future = datetime.now(UTC) + timedelta(days=40)
    body = assert_problem(client.get("/api/v1/usage", {"month": f"{future:%Y-%m}"}), 400)
    assert "has not begun" in str(body)
    assert_problem(client.get("/api/v1/usage", {"order": "O-1", "customer": "x"}), 400)


def test_a_past_month_is_read_to_its_end(catalog, people):
    order = make_order(people.acme, state=OrderState.ACTIVE, **SMALL)
    usage_sync(order=order, nodes={1: "gpu-1"}, storage=False,
               at=datetime(2025, 1, 31, 20, tzinfo=UTC), cause="t")
    usage_sync(order=order, nodes={}, storage=False, at=datetime(2025, 2, 1, 2, tzinfo=UTC), cause="t")
    body = key_client(people.acme).get("/api/v1/usage", {"month": "2025-01"}).json()
    assert Decimal(body["cost_so_far"]) == Decimal(body["forecast"]) == 4 * order.price_hourly
    assert body["orders"][0]["meters"][0]["running"] is False
