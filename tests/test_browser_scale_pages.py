"""In real Chromium, the pages that page through long lists: the approval queue with one order's
node choice opened (htmx), the inventory, the order list and the node page, at 390 px and
1280 px: no console error, no horizontal scroll; the node choice and the pagers work.

SCREENSHOT_DIR=/some/dir keeps a full-page screenshot of each (for people to look at)."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from portal.orders import services as order_services
from portal.orders.states import OrderState
from provisioning.fulfilment import orders as fulfilment
from provisioning.models import NodeEvent
from tests.browser_login import signed_in_page
from tests.factories import H100_SKU, SIZED_PLAN, make_node, make_order, make_quote
from tests.test_browser_walk import NO_SCROLL, WIDTHS


@pytest.fixture
def crowd(people, catalog, sim_dir):
    nodes = [make_node(sku=H100_SKU, state_dir=sim_dir, hostname=f"gpu-h100-{i:03}",
                       fabric_group=f"leaf-{i % 3}") for i in range(30)]
    NodeEvent.objects.bulk_create(NodeEvent(node=nodes[0], transition="note", from_state="ready",
                                            to_state="ready", note=f"fan check {i}") for i in range(40))
    pending = [fulfilment.order_submit(order=order_services.order_place(
        quote=make_quote(people.acme, by=people.alice, plan=SIZED_PLAN, node_count=1 + i % 2),
        by=people.alice), by=people.alice) for i in range(12)]
    for _ in range(30):
        make_order(people.acme, state=OrderState.TERMINATED)
    return {"nodes": nodes, "pending": pending}


def _shot(page, name: str) -> None:
    if where := os.environ.get("SCREENSHOT_DIR"):
        Path(where).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(where) / f"{name}.png"), full_page=True)


@pytest.mark.browser
def test_long_lists_page_cleanly_at_phone_and_desktop_width(live_server, browser, people, crowd):
    base, problems = live_server.url, []
    first = crowd["pending"][0].reference
    pages = {"sam": ["/ops/approvals/"], "alice": ["/orders/"],
             "olga": ["/ops/nodes/", f"/ops/nodes/{crowd['nodes'][0].pk}/"]}
    for username, paths in pages.items():
        context, page, errors = signed_in_page(browser, base, username, width=1280, timeout_ms=30_000)
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            for path in paths:
                errors.clear()
                page.goto(base + path, wait_until="load")
                if path == "/ops/approvals/":  # open one order's node choice: htmx loads it
                    card = page.locator(f"#order-{first}")
                    card.get_by_role("link", name="Choose nodes…").click()
                    expect(card.get_by_role("checkbox")).to_have_count(20)
                    expect(card.get_by_label("gpu-h100-000")).to_be_checked()
                    card.get_by_role("link", name="Next").click()
                    expect(card.get_by_role("checkbox")).to_have_count(10)
                    card.scroll_into_view_if_needed()
                if path == "/orders/":
                    expect(page.get_by_role("link", name="Older")).to_be_visible()
                where = f"{username} {path} at {width}px"
                _shot(page, f"{username}{path.replace('/', '_')}{width}")
                if errors:
                    problems.append(f"{where}: console {errors[:3]}")
                if not page.evaluate(NO_SCROLL):
                    wide = page.evaluate("document.documentElement.scrollWidth")
                    problems.append(f"{where}: scrolls sideways ({wide}px)")
        context.close()
    assert not problems, "\n".join(problems)
