"""The pages issue 29 changed, at phone and desktop width in real Chromium: no console error, no
horizontal overflow, and what each must say (screenshots under $TRAINYARD_SHOTS)."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from portal.catalog.models import ServerSKU
from provisioning.models import Node
from provisioning.monitoring.health import node_accept_if_healthy
from provisioning.states import NodeState
from tests.browser_login import signed_in_page
from tests.conftest import PAGE_TIMEOUT_MS
from tests.factories import H100_SKU, SIZED_PLAN, approved_order, drain, make_node, submitted_order
from tests.provisioning.test_node_check_diagnosis import HOST_KEY

WIDTHS = (390, 1280)
SHOTS = Path(os.environ.get("TRAINYARD_SHOTS", "/tmp/trainyard-shots"))


def _visit(browser, base, username, pages):
    """pages: (name, path, text the page must show, text it must not show)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        context, page, errors = signed_in_page(browser, base, username,
                                               width=width, timeout_ms=PAGE_TIMEOUT_MS)
        for name, path, must, must_not in pages:
            page.goto(base + path)
            page.wait_for_load_state("networkidle")
            for text in must:
                expect(page.locator("main")).to_contain_text(text)
            for text in must_not:
                expect(page.locator("main")).not_to_contain_text(text)
            page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), (name, width)
        assert errors == [], errors
        context.close()


@pytest.mark.browser
def test_customer_pages(live_server, browser, people, catalog, sim_dir):
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people)
    drain(order.runs.get().pk)
    _visit(browser, live_server.url, "alice", [
        ("order-progress", f"/orders/{order.reference}/", ["Operating system installed", "you"],
         ["$ running", "echo"]),
        ("quote-ordered", f"/configure/quotes/{order.quote.reference}/",
         [f"ordered as {order.reference}"], ["Place order"]),
        ("server-acceptance", f"/orders/{order.reference}/server/", ["Training loss (FSDP2)"],
         ["GB/s bus bandwidth"]),
    ])


@pytest.mark.browser
def test_staff_pages(live_server, browser, people, catalog, sim_dir):
    submitted_order(people, plan=SIZED_PLAN)
    node = Node.objects.create(
        hostname="gpu-ssh-01", sku=ServerSKU.objects.get(slug=H100_SKU), driver="ssh",
        management_address="127.0.0.1:9", state=NodeState.ENROLLED,
        driver_options={"host_key": HOST_KEY},
        nvme_devices=["/dev/nvme0n1"])
    node_accept_if_healthy(node=node, by=people.olga)
    _visit(browser, live_server.url, "sam", [
        ("approvals", "/ops/approvals/", ["Internal note (optional, staff only)", "FSDP full shard"], []),
    ])
    _visit(browser, live_server.url, "olga", [
        ("node-diagnosis", f"/ops/nodes/{node.pk}/", ["could not reach 127.0.0.1 port 9 with the ssh driver"],
         ["operators have been told"]),
    ])
