"""The staff home at phone and desktop width (issue 29, items 8 and 15): each stock row's
"N ready of M" sits on its own SKU's row; a fresh order does not wait "0 minutes"."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser_login import signed_in_page
from tests.conftest import PAGE_TIMEOUT_MS
from tests.factories import H100_SKU, L4_SKU, make_node, submitted_order

WIDTHS = (390, 1280)
SHOTS = Path(os.environ.get("TRAINYARD_SHOTS", "/tmp/trainyard-shots"))


@pytest.mark.browser
def test_stock_rows_line_up_and_waiting_reads_well(live_server, browser, people, catalog, sim_dir):
    for sku, count in ((H100_SKU, 3), (L4_SKU, 1), ("8x-b200-sxm-180gb", 2)):
        for _ in range(count):
            make_node(sku=sku, state_dir=sim_dir)
    order = submitted_order(people)
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        context, page, errors = signed_in_page(browser, live_server.url, "sam",
                                               width=width, timeout_ms=PAGE_TIMEOUT_MS)
        page.goto(f"{live_server.url}/")
        expect(page.get_by_role("heading", name="Stock")).to_be_visible()
        rows = page.locator("#stock-title ~ ul li")
        assert rows.count() == 3
        for i in range(rows.count()):
            row = rows.nth(i).bounding_box()
            for part in rows.nth(i).locator(":scope > span").all():
                box = part.bounding_box()
                assert row["y"] <= box["y"] and box["y"] + box["height"] <= row["y"] + row["height"] + 1, (
                    width, i, rows.nth(i).inner_text())
                assert box["x"] + box["width"] <= row["x"] + row["width"] + 1
        queue = page.locator("#queue-title ~ ul").first
        expect(queue).to_contain_text(order.reference)
        expect(queue).not_to_contain_text("0 minutes")
        page.screenshot(path=str(SHOTS / f"staff-home-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert errors == [], errors
        context.close()
