"""In real Chromium, a reseller's customer (issue 31, item 5): the catalog, the configurator's
choices and its price box show the reseller's selling price (its markup on the reseller's cost),
one and the same number; the reseller quoting for that customer sees its cost and, labelled,
what the customer pays. Phone and desktop widths, no sideways scrolling."""

import os
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
from playwright.sync_api import expect

from portal.catalog.models import ServerSKU
from portal.catalog.services import resale_prices_set
from portal.core.units import usd
from tests.browser_login import signed_in_page
from tests.conftest import PAGE_TIMEOUT_MS
from tests.factories import member_of

WIDTHS = (390, 1280)
SKU = "1x-l4-24gb"
SHOTS = Path(os.environ.get("TRAINYARD_SHOTS", "/tmp/resale_shots"))


def _up20(amount: Decimal) -> Decimal:
    return (amount * Decimal("1.2")).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


@pytest.mark.browser
def test_the_customer_sees_one_selling_price_on_the_catalog_the_choices_and_the_price_box(
    live_server, browser, people, catalog
):
    resale_prices_set(reseller=people.reseller, customer=people.client_org, percent="20", items={})
    member_of(people.client_org, username="carol")
    sku = ServerSKU.objects.get(slug=SKU)
    selling = usd(_up20(sku.price_hourly))
    assert selling != usd(sku.price_hourly)
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        context, page, errors = signed_in_page(
            browser, live_server.url, "carol", width=width, timeout_ms=PAGE_TIMEOUT_MS
        )
        page.goto(f"{live_server.url}/catalog/")
        row = page.locator("#sku-table tbody tr").filter(
            has=page.get_by_role("link", name=f"{sku.gpu_count}× {sku.gpu.name}", exact=True)
        )
        expect(row.locator("td[data-label='Per hour']")).to_have_text(selling)
        page.screenshot(path=str(SHOTS / f"catalog-customer-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

        page.goto(f"{live_server.url}/configure/?sku={SKU}")
        expect(page.get_by_label("GPU server").locator(f"option[value='{SKU}']")).to_contain_text(
            f"{selling}/h"
        )
        server_line = page.locator(".price-lines tbody tr").first
        expect(server_line.locator("td[data-label='Per hour']")).to_have_text(selling)
        lines = page.locator(".price-lines tbody td[data-label='Per hour']").all_inner_texts()
        total = sum((Decimal(t.lstrip("$").replace(",", "")) for t in lines), Decimal(0))
        expect(page.locator("#price-hourly")).to_have_text(usd(total))
        expect(page.locator("#customer-price")).to_have_count(0)
        page.screenshot(path=str(SHOTS / f"configure-customer-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert errors == [], errors
        context.close()


@pytest.mark.browser
def test_the_reseller_quoting_for_its_customer_sees_what_the_customer_pays(
    live_server, browser, people, catalog
):
    resale_prices_set(reseller=people.reseller, customer=people.client_org, percent="20", items={})
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        context, page, errors = signed_in_page(
            browser, live_server.url, "rita", width=width, timeout_ms=PAGE_TIMEOUT_MS
        )
        page.goto(f"{live_server.url}/configure/?sku={SKU}&organisation={people.client_org.slug}")
        expect(page.get_by_role("heading", name="Your cost")).to_be_visible()
        cost = Decimal(page.locator("#price-hourly").inner_text().lstrip("$").replace(",", ""))
        box = page.locator("#customer-price")
        expect(box.get_by_role("heading", name="Resale Client pays")).to_be_visible()
        expect(box.locator("#customer-price-hourly")).to_have_text(usd(_up20(cost)))
        page.screenshot(path=str(SHOTS / f"configure-reseller-for-customer-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert errors == [], errors
        context.close()


@pytest.mark.browser
def test_the_nvme_choice_follows_the_chosen_servers_markup(live_server, browser, people, catalog):
    """50 % on the L4, 20 % on everything else: the NVMe choice's label is the price box's NVMe
    line for the L4, and again for another server once it is chosen (relabelled in place: the
    NVMe choice keeps the focus when it is the one changed; no console error)."""
    resale_prices_set(reseller=people.reseller, customer=people.client_org, percent="20",
                      items={f"sku:{SKU}": "50"})
    member_of(people.client_org, username="carol")
    other = ServerSKU.objects.filter(is_active=True).exclude(slug=SKU).order_by("price_hourly").first()
    for width in WIDTHS:
        context, page, errors = signed_in_page(
            browser, live_server.url, "carol", width=width, timeout_ms=PAGE_TIMEOUT_MS
        )
        page.goto(f"{live_server.url}/configure/?sku={SKU}")
        nvme_line = page.locator(".price-lines tbody tr").filter(has_text="NVMe").locator(
            "td[data-label='Per month']")
        chosen = page.locator("#id_nvme option:checked")
        at_l4 = nvme_line.inner_text()
        expect(chosen).to_contain_text(f"{at_l4}/mo")
        page.get_by_label("GPU server").select_option(other.slug)
        expect(nvme_line).not_to_have_text(at_l4)
        expect(chosen).to_contain_text(f"{nvme_line.inner_text()}/mo")
        nvme = page.locator("#id_nvme")
        nvme.focus()
        before = nvme_line.inner_text()
        nvme.select_option(index=1)
        expect(nvme_line).not_to_have_text(before)
        expect(chosen).to_contain_text(f"{nvme_line.inner_text()}/mo")
        assert page.evaluate("document.activeElement.id") == "id_nvme"  # replaced, still focused
        page.screenshot(path=str(SHOTS / f"configure-customer-per-sku-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert errors == [], errors
        context.close()
