"""An operator power-cycles a node from its page in real Chromium, at phone and desktop width:
the action asks first and says what stops; confirming queues it, and the worker's outcome (the
real sushy-emulator's BMC reached) shows in the node's history."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from portal.catalog.models import ServerSKU
from provisioning.models import Node
from provisioning.states import NodeState, WipeMethod
from provisioning.tasks import node_power_task
from tests.browser_login import signed_in_page
from tests.conftest import PAGE_TIMEOUT_MS
from tests.factories import H100_SKU
from tests.provisioning.redfish_emulator import (  # noqa: F401 (a fixture)
    PASSWORD,
    redfish_emulator_fixture,
)

WIDTHS = (390, 1280)
SHOTS = Path(os.environ.get("TRAINYARD_SHOTS", "/tmp/trainyard-shots"))


@pytest.mark.browser
def test_an_operator_power_cycles_a_node_from_its_page(live_server, browser, people, catalog,
                                                        redfish_emulator, settings):
    settings.NODE_DRIVER_OPTIONS = {**settings.NODE_DRIVER_OPTIONS,
                                    "ssh": {"redfish": {"password": PASSWORD}}}
    options = {k: v for k, v in redfish_emulator.options("sys-page").items() if k != "password"}
    node = Node.objects.create(
        hostname="gpu-bmc-02", sku=ServerSKU.objects.get(slug=H100_SKU),
        management_address="127.0.0.1:1", driver="ssh", state=NodeState.READY,
        wipe_method=WipeMethod.FILES,
        driver_options={"host_key": "SHA256:" + "A" * 43, "redfish": options})
    base = live_server.url
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        context, page, errors = signed_in_page(browser, base, "olga", width=width,
                                               timeout_ms=PAGE_TIMEOUT_MS)
        page.goto(f"{base}/ops/nodes/{node.pk}/")
        expect(page.get_by_role("button", name="Yes, power cycle now")).to_be_hidden()
        page.get_by_text("Power cycle…").click()
        expect(page.get_by_text("Hard reset: off and on again")).to_be_visible()
        expect(page.get_by_text("anything not written to disk is lost").last).to_be_visible()
        page.locator("#power-title").scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / f"node-power-confirm-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.get_by_role("button", name="Yes, power cycle now").click()
        expect(page.get_by_text("Power cycle of gpu-bmc-02 sent to its BMC")).to_be_visible()
        assert node_power_task(node.pk, people.olga.pk, "cycle")  # what the queued task runs
        page.reload()
        expect(page.locator("#node-history")).to_contain_text("Power cycle: done")
        page.screenshot(path=str(SHOTS / f"node-power-done-{width}.png"), full_page=True)
        assert errors == [], errors
        context.close()
    assert redfish_emulator.power_state("sys-page") == "On"


@pytest.mark.browser
def test_the_enrol_form_takes_a_redfish_bmc(live_server, browser, people, catalog):
    base = live_server.url
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        context, page, errors = signed_in_page(browser, base, "olga", width=width,
                                               timeout_ms=PAGE_TIMEOUT_MS)
        page.goto(f"{base}/ops/nodes/enrol/")
        page.get_by_label("BMC protocol").select_option("redfish")
        page.get_by_label("BMC address").fill("https://10.9.1.1")
        page.get_by_label("Redfish system id").fill("1")
        page.get_by_label("BMC protocol").scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / f"node-enrol-redfish-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert errors == [], errors
        context.close()


@pytest.mark.browser
def test_options_stored_in_a_shape_not_read_are_named_on_the_node_page(live_server, browser, people, catalog):
    node = Node.objects.create(
        hostname="gpu-bmc-03", sku=ServerSKU.objects.get(slug=H100_SKU),
        management_address="10.7.0.3", driver="ssh", state=NodeState.READY, wipe_method=WipeMethod.FILES,
        driver_options={"host_key": "SHA256:" + "A" * 43, "test_host": "yes",
                        "fabric_address": ["10.50.0.3", "10.50.0.4"]})  # stored before they were refused
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        context, page, errors = signed_in_page(browser, live_server.url, "olga", width=width,
                                               timeout_ms=PAGE_TIMEOUT_MS)
        page.goto(f"{live_server.url}/ops/nodes/{node.pk}/")
        expect(page.get_by_text('driver_options.test_host is true or false, not the text "yes".',
                                exact=False)).to_be_visible()
        expect(page.get_by_text("not read", exact=True)).to_be_visible()
        page.screenshot(path=str(SHOTS / f"node-options-not-read-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert errors == [], errors
        context.close()
