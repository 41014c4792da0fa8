"""In real Chromium, a reseller with a price list (issue 29, items 2 and 3): the catalog and the
configurator's choices show the reseller's prices, the same as the price box; "Quote for" starts
at the reseller's own organisation, valid, so a quote can be created on first load."""

import os
from decimal import Decimal
from pathlib import Path

import pytest
from playwright.sync_api import expect

from portal.catalog.models import PriceList, ServerSKU
from portal.core.units import usd
from tests.browser_login import signed_in_page
from tests.conftest import PAGE_TIMEOUT_MS

WIDTHS = (390, 1280)
SKU = "1x-l4-24gb"
SHOTS = Path(os.environ.get("TRAINYARD_SHOTS", "/tmp/trainyard-shots"))


@pytest.mark.browser
def test_the_reseller_sees_its_own_prices_on_the_catalog_and_the_configurator(
        live_server, browser, people, catalog):
    PriceList.objects.create(organisation=people.reseller, name="Partner", percent=Decimal("20"))
    sku = ServerSKU.objects.get(slug=SKU)
    paid = usd(sku.price_hourly * Decimal("1.2"))
    listed = usd(sku.price_hourly)
    assert paid != listed
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        context, page, errors = signed_in_page(browser, live_server.url, "rita", width=width,
                                               timeout_ms=PAGE_TIMEOUT_MS)
        page.goto(f"{live_server.url}/catalog/")
        row = page.locator("#sku-table tbody tr").filter(has=page.get_by_role(
            "link", name=f"{sku.gpu_count}× {sku.gpu.name}", exact=True))
        expect(row.locator("td[data-label='Per hour']")).to_have_text(paid)
        page.screenshot(path=str(SHOTS / f"catalog-reseller-{width}.png"), full_page=True)

        page.goto(f"{live_server.url}/configure/?sku={SKU}")
        option = page.get_by_label("GPU server").locator(f"option[value='{SKU}']")
        expect(option).to_contain_text(f"{paid}/h")
        server_line = page.locator(".price-lines tbody tr").first
        expect(server_line.locator("td[data-label='Per hour']")).to_have_text(paid)
        assert errors == [], errors
        context.close()


@pytest.mark.browser
def test_a_reseller_can_create_a_quote_on_first_load(live_server, browser, people, catalog):
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        context, page, errors = signed_in_page(browser, live_server.url, "rita", width=width,
                                               timeout_ms=PAGE_TIMEOUT_MS)
        page.goto(f"{live_server.url}/configure/")
        quote_for = page.get_by_label("Quote for")
        expect(quote_for).to_have_value(people.reseller.slug)
        expect(page.get_by_text("This field is required")).to_have_count(0)
        create = page.get_by_role("button", name="Create quote")
        expect(create).to_be_enabled()
        page.screenshot(path=str(SHOTS / f"configure-reseller-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        create.click()
        page.wait_for_url("**/quotes/**")
        assert errors == [], errors
        context.close()
