"""The node page asks a node's imaging engine what it says of the machine (a fragment loaded after
the page): against the real standalone Ironic; staff only; no engine, no fragment."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from portal.catalog.models import ServerSKU
from provisioning.inventory.services import node_enrol
from tests.browser_login import signed_in_page
from tests.conftest import PAGE_TIMEOUT_MS
from tests.factories import L4_SKU, make_node, staff, verified_login

SHOTS = Path(os.environ.get("TRAINYARD_SHOTS", "/tmp/trainyard-shots"))


@pytest.fixture
def ironic_settings(settings, ironic_admin):
    user, password = ironic_admin.server.htpasswd
    settings.NODE_DRIVER_OPTIONS = {**settings.NODE_DRIVER_OPTIONS, "ironic": {
        "ironic": {"url": ironic_admin.server.url, "auth": "http_basic", "username": user,
                   "password": password, "timeout_s": 5}}}
    return settings


def _ironic_node(catalog, ironic_admin, uuid=None):
    uuid = uuid or ironic_admin.enrol()["uuid"]
    return node_enrol(by=staff("operator"), sku=ServerSKU.objects.get(slug=L4_SKU),
                      hostname="l4-engine-01", management_address="10.9.0.5", driver="ironic",
                      driver_options={"ironic": {"node": uuid}})


def test_the_node_page_shows_what_ironic_says(client, catalog, ironic_admin, ironic_settings):
    node = _ironic_node(catalog, ironic_admin)
    verified_login(client, staff("operator"))
    page = client.get(f"/ops/nodes/{node.pk}/").content.decode()
    assert f'hx-get="/ops/nodes/{node.pk}/engine/"' in page
    word = client.get(f"/ops/nodes/{node.pk}/engine/").content.decode()
    assert "ironic: available" in word and "(free to deploy)" in word
    ironic_admin.maintenance(node.driver_options["ironic"]["node"], "PSU 2 failed")
    held = client.get(f"/ops/nodes/{node.pk}/engine/").content.decode()
    assert "maintenance: PSU 2 failed" in held and "(not free to deploy)" in held


def test_an_engine_that_does_not_answer_is_said_so(client, catalog, ironic_admin, ironic_settings):
    ironic_settings.NODE_DRIVER_OPTIONS["ironic"]["ironic"]["url"] = "http://127.0.0.1:9"
    node = _ironic_node(catalog, ironic_admin)
    verified_login(client, staff("operator"))
    word = client.get(f"/ops/nodes/{node.pk}/engine/").content.decode()
    assert "the engine did not answer" in word


def test_no_engine_no_fragment_and_customers_never_see_it(client, catalog, people, sim_dir, ironic_admin,
                                                          ironic_settings):
    plain = make_node(sku=L4_SKU, state_dir=sim_dir)
    verified_login(client, staff("operator"))
    assert "/engine/" not in client.get(f"/ops/nodes/{plain.pk}/").content.decode()
    assert client.get(f"/ops/nodes/{plain.pk}/engine/").status_code == 404
    engine_node = _ironic_node(catalog, ironic_admin)
    client.logout()
    verified_login(client, people.alice)
    assert client.get(f"/ops/nodes/{engine_node.pk}/engine/").status_code in (403, 404)


@pytest.mark.browser
def test_the_engine_row_loads_after_the_page_at_both_widths(live_server, browser, people, catalog,
                                                           ironic_admin, ironic_settings):
    node = _ironic_node(catalog, ironic_admin)
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in (390, 1280):
        context, page, errors = signed_in_page(browser, live_server.url, "olga", width=width,
                                               timeout_ms=PAGE_TIMEOUT_MS)
        page.goto(f"{live_server.url}/ops/nodes/{node.pk}/")
        facts = page.locator("dl.facts").first
        expect(facts).to_contain_text("ironic: available")
        expect(facts).to_contain_text("(free to deploy)")
        expect(facts).to_contain_text("not needed: its imaging engine erases it")
        page.screenshot(path=str(SHOTS / f"node-engine-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert errors == [], errors
        context.close()
