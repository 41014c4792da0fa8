"""In real Chromium at phone and desktop width: reboot, re-deploy and API-key revoke ask first
and say what stops; confirming does it."""

import pytest
from playwright.sync_api import expect

from portal.accounts.services import api_key_issue
from provisioning.fulfilment import approvals
from provisioning.models import ProvisioningRun
from tests.browser_login import log_in as _log_in
from tests.factories import H100_SKU, drain, make_node, submitted_order

WIDTHS = (390, 1280)


@pytest.fixture
def active(people, catalog, sim_dir, settings):
    settings.SIMULATED_DRIVER_DELAY_SCALE = 0
    make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-h100-a01")
    order = approvals.order_approve(order=submitted_order(people), by=people.sam)
    drain(order.runs.get().pk)
    return order


@pytest.mark.browser
@pytest.mark.parametrize("width", WIDTHS)
def test_reboot_asks_first_and_says_what_stops(live_server, browser, people, active, width,
                                               tmp_path):
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    _log_in(page, live_server.url, "alice")
    page.goto(f"{live_server.url}/orders/{active.reference}/server/")
    expect(page.get_by_role("button", name="Yes, reboot now")).to_be_hidden()
    page.get_by_text("Reboot…").click()
    expect(page.get_by_text("your training jobs included")).to_be_visible()
    page.locator("#actions-title").scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / f"server-reboot-confirm-{width}.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.get_by_role("button", name="Yes, reboot now").click()
    expect(page.get_by_text("Reboot started")).to_be_visible()
    assert ProvisioningRun.objects.filter(order=active, kind="reboot").count() == 1
    context.close()


@pytest.mark.browser
@pytest.mark.parametrize("width", WIDTHS)
def test_revoking_an_api_key_asks_first(live_server, browser, people, width, tmp_path):
    key = api_key_issue(organisation=people.acme, name="ci bot").api_key
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    _log_in(page, live_server.url, "alice")
    page.goto(f"{live_server.url}/orgs/{people.acme.slug}/")
    page.get_by_text("Revoke…").click()
    expect(page.get_by_text("every request signed with")).to_be_visible()
    page.screenshot(path=str(tmp_path / f"key-revoke-confirm-{width}.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.get_by_role("button", name="Yes, revoke ci bot").click()
    expect(page.get_by_text("revoked. Requests with it now fail.")).to_be_visible()
    key.refresh_from_db()
    assert key.revoked_at is not None
    context.close()
