"""In real Chromium at phone and desktop width: a reseller's admin adds a customer, sets what its
customers pay (a bad markup is refused, its input kept), adds a webhook endpoint (the secret
shown once) and reads its deliveries; the customer's member reads its usage at those prices.
No horizontal overflow, no console errors; screenshots in TRAINYARD_SHOTS."""

import os
from datetime import UTC, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from portal.billing.selectors import month_of
from portal.billing.services import usage_sync
from portal.catalog.models import PriceList
from portal.catalog.pricing import PriceList as Markup
from portal.catalog.services import resale_prices_set
from portal.core.units import usd
from portal.orders.states import OrderState
from portal.webhooks.models import WebhookAttempt
from portal.webhooks.publish import endpoint_test_send
from portal.webhooks.services import endpoint_create
from tests.browser_login import signed_in_page
from tests.conftest import PAGE_TIMEOUT_MS
from tests.factories import L4_SKU, make_order, member_of

WIDTHS = (390, 1280)
SHOTS = Path(os.environ.get("TRAINYARD_SHOTS", "/tmp/trainyard-shots"))
SMALL = {"sku": L4_SKU, "network": "eth-1g", "nvme": "nvme-1tb-single"}


def _look(page, name: str, width: int, errors: list) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), name
    page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
    assert errors == [], (name, errors)


@pytest.mark.browser
def test_the_resellers_pages(live_server, browser, people, catalog):
    PriceList.objects.create(organisation=people.reseller, name="Partner", percent=Decimal("20"))
    SHOTS.mkdir(parents=True, exist_ok=True)
    base = live_server.url
    for width in WIDTHS:
        context, page, errors = signed_in_page(browser, base, "rita", width=width,
                                               timeout_ms=PAGE_TIMEOUT_MS)
        page.goto(f"{base}/orgs/{people.reseller.slug}/")
        _look(page, "reseller-organisation", width, errors)
        page.get_by_role("link", name="Customers", exact=True).click()
        page.get_by_label("Name").fill(f"Neuro Labs {width}")
        page.get_by_role("button", name="Add customer").click()
        expect(page.locator("#customer-table")).to_contain_text(f"Neuro Labs {width}")
        _look(page, "reseller-customers", width, errors)
        page.goto(f"{base}/orgs/{people.reseller.slug}/customers/{people.client_org.slug}/")
        _look(page, "reseller-customer-edit", width, errors)

        page.goto(f"{base}/orgs/{people.reseller.slug}/prices/")
        page.get_by_label("Markup on everything (%)").fill("25")
        page.get_by_label("Own markup for 1× L4 (PCIe) (%)").fill("900")
        page.get_by_role("button", name="Save prices").click()
        expect(page.get_by_role("alert")).to_contain_text("Nothing was saved")
        expect(page.get_by_label("Own markup for 1× L4 (PCIe) (%)")).to_have_value("900")
        errors.clear()  # the 400 answer of the refused form is logged by the browser
        _look(page, "reseller-prices-refused", width, errors)
        page.get_by_label("Own markup for 1× L4 (PCIe) (%)").fill("30")
        page.get_by_role("button", name="Save prices").click()
        expect(page.locator(".alert-success")).to_contain_text("saved")
        _look(page, "reseller-prices", width, errors)

        page.goto(f"{base}/orgs/{people.reseller.slug}/webhooks/")
        if width == WIDTHS[0]:
            _look(page, "reseller-webhooks-empty", width, errors)
        page.get_by_label("URL").fill(f"https://hooks.example.com/{width}")
        page.get_by_role("button", name="Add endpoint").click()
        expect(page.locator("#webhook-secret")).to_contain_text("whsec_")
        _look(page, "reseller-webhook-new", width, errors)
        page.goto(f"{base}/orgs/{people.reseller.slug}/webhooks/")
        _look(page, "reseller-webhooks", width, errors)
        context.close()


@pytest.mark.browser
def test_the_webhook_deliveries_and_the_customers_usage(live_server, browser, people, catalog):
    SHOTS.mkdir(parents=True, exist_ok=True)
    endpoint = endpoint_create(organisation=people.reseller, url="https://hooks.example.com/t",
                               description="billing sync")[0]
    delivery = endpoint_test_send(endpoint=endpoint)
    WebhookAttempt.objects.create(delivery=delivery, number=1, status_code=503, duration_ms=41,
                                  error="Service Unavailable")
    order = make_order(people.client_org, state=OrderState.ACTIVE, **SMALL)
    now = timezone.now().astimezone(UTC)
    usage_sync(order=order, nodes={1: "gpu-1"}, storage=False,
               at=max(now - timedelta(hours=2, minutes=5), month_of(now).start), cause="t")
    resale_prices_set(reseller=people.reseller, percent="25", items={})
    member_of(people.client_org, username="carol")
    base = live_server.url
    for width in WIDTHS:
        context, page, errors = signed_in_page(browser, base, "rita", width=width,
                                               timeout_ms=PAGE_TIMEOUT_MS)
        page.goto(f"{base}/orgs/{people.reseller.slug}/webhooks/{endpoint.reference}/")
        expect(page.get_by_text("HTTP 503")).to_be_visible()
        _look(page, "reseller-webhook", width, errors)
        page.goto(f"{base}/orders/?customer={people.client_org.slug}")
        expect(page.locator("#order-table thead")).to_contain_text("Customer")
        _look(page, "reseller-orders", width, errors)
        page.goto(f"{base}/billing/{people.reseller.slug}/")
        expect(page.locator("#customer-table")).to_contain_text("They pay so far")
        _look(page, "reseller-billing", width, errors)
        context.close()
        context, page, errors = signed_in_page(browser, base, "carol", width=width,
                                               timeout_ms=PAGE_TIMEOUT_MS)
        page.goto(f"{base}/billing/{people.client_org.slug}/")
        selling = Markup(percent=Decimal("25")).unit(f"sku:{L4_SKU}", order.price_hourly)
        hours = int(page.locator("td[data-label='Billed hours'] strong").first.inner_text())
        expect(page.locator("td[data-label='So far'] strong").first).to_have_text(usd(selling * hours))
        _look(page, "customer-billing-selling", width, errors)
        page.goto(f"{base}/orders/{order.reference}/")
        expect(page.locator("#price-title ~ .price-now .stat")).to_have_text(usd(selling))
        _look(page, "customer-order-selling", width, errors)
        page.goto(f"{base}/orders/")
        expect(page.locator("#order-table td[data-label='Price']")).to_have_text(f"{usd(selling)}/h")
        _look(page, "customer-orders-selling", width, errors)
        context.close()
