"""The server page's GPU charts in real Chromium at phone and desktop width (the simulated series
of `make run`): drawn, labelled simulated, the range switched by htmx, no overflow, no console
error (screenshots under $TRAINYARD_SHOTS)."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser_login import signed_in_page
from tests.conftest import PAGE_TIMEOUT_MS
from tests.factories import H100_SKU, approved_order, drain, make_node

SHOTS = Path(os.environ.get("TRAINYARD_SHOTS", "/tmp/trainyard-shots"))


def _gpu_card(browser, live_server, order, width: int):
    """alice's server page of ``order`` at ``width``: (context, page, console errors, the card)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    context, page, errors = signed_in_page(browser, live_server.url, "alice", width=width,
                                           timeout_ms=PAGE_TIMEOUT_MS)
    page.goto(f"{live_server.url}/orders/{order.reference}/server/")
    return context, page, errors, page.locator("#gpu-metrics")


@pytest.mark.browser
@pytest.mark.parametrize("width", (390, 1280))
def test_the_gpu_charts_at_phone_and_desktop_width(live_server, browser, people, catalog, sim_dir,
                                                   settings, width):
    settings.MONITORING_PROMETHEUS_URL = ""
    make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-h100-a01")
    order = approved_order(people)
    drain(order.runs.get().pk)
    context, page, errors, card = _gpu_card(browser, live_server, order, width)
    expect(card).to_contain_text("GPU busy")
    expect(card).to_contain_text("over the last hour")
    expect(card).to_contain_text("Simulated data")
    assert card.locator("svg.gpu-chart").count() == 6
    assert card.locator("svg.gpu-chart .series").count() == 6 * 8
    card.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"gpu-charts-1h-{width}.png"), full_page=True)
    card.get_by_role("link", name="7 days").click()
    expect(page.locator("#gpu-metrics")).to_contain_text("over the last 7 days")
    expect(page.locator("#gpu-metrics a[aria-current]")).to_have_text("7 days")
    assert page.url.endswith("/server/")  # swapped in place by htmx, no navigation
    page.locator("#gpu-metrics").screenshot(path=str(SHOTS / f"gpu-charts-7d-{width}.png"))
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    # Tick labels stay readable on a phone: at least 10 px on screen.
    heights = page.evaluate("""() => [...document.querySelectorAll('#gpu-metrics .tick')]
        .map(t => t.getBoundingClientRect().height)""")
    assert heights and min(heights) >= 10, heights
    assert errors == [], errors
    context.close()


@pytest.mark.browser
@pytest.mark.parametrize("width", (390, 1280))
def test_an_open_alert_on_the_staff_home_and_node_page(live_server, browser, people, catalog,
                                                       sim_dir, width):
    from django.utils import timezone

    from provisioning.monitoring.models import NodeAlert

    node = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-h100-b07")
    NodeAlert.objects.create(node=node, name="GpuXidError", fingerprint="f1", severity="warning",
                             summary="gpu-h100-b07: GPU 3 reported an XID error in the last 10 "
                                     "minutes", started_at=timezone.now())
    SHOTS.mkdir(parents=True, exist_ok=True)
    context, page, errors = signed_in_page(browser, live_server.url, "olga", width=width,
                                           timeout_ms=PAGE_TIMEOUT_MS)
    alerts = page.locator("#alerts")
    expect(alerts).to_contain_text("1 open")
    expect(alerts).to_contain_text("gpu-h100-b07 needs attention")
    page.screenshot(path=str(SHOTS / f"staff-home-alert-{width}.png"), full_page=True)
    alerts.get_by_role("link", name="gpu-h100-b07").click()
    expect(page.locator("main")).to_contain_text("Needs attention")
    expect(page.locator("main")).to_contain_text("GPU 3 reported an XID error")
    page.screenshot(path=str(SHOTS / f"node-alert-{width}.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert errors == [], errors
    context.close()


@pytest.mark.browser
@pytest.mark.parametrize("width", (390, 1280))
def test_real_gpus_without_prometheus_say_the_metrics_are_not_collected(live_server, browser, people,
                                                                        catalog, settings, width):
    from portal.orders.states import OrderState
    from provisioning.models import Node
    from provisioning.states import NodeState
    from tests.factories import make_order

    settings.MONITORING_PROMETHEUS_URL = ""
    order = make_order(people.acme, by=people.alice, state=OrderState.ACTIVE)
    Node.objects.create(hostname="gpu-h100-c03", sku=order.sku, management_address="127.0.0.2",
                        driver="ssh", state=NodeState.ACTIVE, order=order)
    context, page, errors, card = _gpu_card(browser, live_server, order, width)
    expect(card).to_contain_text("GPU metrics are not collected for this server yet.")
    expect(card).not_to_contain_text("Simulated")
    assert card.locator("svg.gpu-chart").count() == 0 and card.locator("nav").count() == 0
    card.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"gpu-charts-not-collected-{width}.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert errors == [], errors
    context.close()
