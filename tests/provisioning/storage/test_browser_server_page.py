"""The server page at phone and desktop width (issue 29, item 17): the bucket card comes before
the training environment files (which fold per server), its values stay whole on one line and
each has a working Copy button; the catalog's filters leave room for servers on a phone."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser_login import signed_in_page
from tests.conftest import PAGE_TIMEOUT_MS
from tests.factories import H100_SKU, approved_order, drain, make_node

WIDTHS = (390, 1280)
SHOTS = Path(os.environ.get("TRAINYARD_SHOTS", "/tmp/trainyard-shots"))


@pytest.mark.browser
def test_bucket_first_values_whole_and_copyable(live_server, browser, people, catalog, sim_dir,
                                                 storage_provider, embedded_s3):
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people, storage="minio", storage_tb=2)
    drain(order.runs.get().pk)
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        context, page, errors = signed_in_page(browser, live_server.url, "alice",
                                               width=width, timeout_ms=PAGE_TIMEOUT_MS,
                                               permissions=["clipboard-read", "clipboard-write"])
        page.goto(f"{live_server.url}/orders/{order.reference}/server/")
        bucket = page.locator("#storage").bounding_box()
        files = page.locator("#stack-files").bounding_box()
        assert bucket["y"] < files["y"], width
        for value_id in ("copy-bucket", "copy-endpoint", "copy-key-id"):
            value = page.locator(f"#{value_id}")
            box = value.bounding_box()
            line = float(value.evaluate("e => parseFloat(getComputedStyle(e).lineHeight) || 20"))
            assert box["height"] < 2 * line + 12, (value_id, width, box)  # one line, not broken
            page.locator(f"button[data-copy='{value_id}']").click()
            assert page.evaluate("navigator.clipboard.readText()") == value.inner_text().strip()
        page.screenshot(path=str(SHOTS / f"server-bucket-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        if width == 390:
            page.goto(f"{live_server.url}/catalog/")
            expect(page.locator("#sku-table tbody tr").first).to_be_in_viewport()
            page.screenshot(path=str(SHOTS / "catalog-phone-first-screen-390.png"))
        assert errors == [], errors
        context.close()
