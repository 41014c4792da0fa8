"""A reseller's "My orders" (issue 29, item 12): whose each order is, and a filter by customer,
at phone and desktop width."""

import os
from decimal import Decimal
from pathlib import Path

import pytest
from playwright.sync_api import expect

from portal.catalog.models import PriceList
from tests.browser_login import signed_in_page
from tests.conftest import PAGE_TIMEOUT_MS
from tests.factories import make_order

WIDTHS = (390, 1280)
SHOTS = Path(os.environ.get("TRAINYARD_SHOTS", "/tmp/trainyard-shots"))


@pytest.mark.browser
def test_the_reseller_sees_and_filters_by_customer(live_server, browser, people, catalog):
    PriceList.objects.create(organisation=people.reseller, name="Partner", percent=Decimal("20"))
    own = make_order(people.reseller, by=people.rita)
    theirs = make_order(people.client_org, by=people.rita)
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        context, page, errors = signed_in_page(browser, live_server.url, "rita",
                                               width=width, timeout_ms=PAGE_TIMEOUT_MS)
        page.goto(f"{live_server.url}/orders/")
        table = page.locator("#order-table")
        expect(table).to_contain_text(people.client_org.name)
        expect(table).to_contain_text(theirs.reference)
        expect(table).to_contain_text(own.reference)
        page.get_by_label("Customer", exact=True).select_option(people.client_org.slug)
        page.get_by_role("button", name="Show").click()
        expect(table).to_contain_text(theirs.reference)
        expect(table).not_to_contain_text(own.reference)
        page.screenshot(path=str(SHOTS / f"orders-reseller-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.goto(f"{live_server.url}/orgs/{people.reseller.slug}/")
        expect(page.locator("#price-list")).to_contain_text("+$")
        page.locator("#price-list").screenshot(path=str(SHOTS / f"org-price-list-{width}.png"))
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert errors == [], errors
        context.close()
