"""What a node's driver reads, on the pages, at phone and desktop width (issue 26, item 5): the
node page of an ssh node shows its host key, customer login and BMC, a simulated node's shows
none of them; the enrol form names the drivers those fields are for; a simulated node's edit form
has no such fields."""

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.accounts.ssh_keygen import new_public_key
from tests.browser_login import signed_in_page
from tests.conftest import PAGE_TIMEOUT_MS
from tests.factories import H100_SKU, make_node

WIDTHS = (390, 1280)
SHOTS = Path(os.environ.get("TRAINYARD_SHOTS", "/tmp/trainyard-shots"))


@pytest.mark.browser
def test_the_pages_show_what_each_driver_reads(live_server, browser, people, catalog, sim_dir):
    simulated = make_node(sku=H100_SKU, state_dir=sim_dir)
    ssh = make_node(sku=H100_SKU, state_dir=sim_dir)
    ssh.driver = "ssh"
    ssh.driver_options = {"host_key": " ".join(new_public_key().split()[:2]), "login_user": "alice",
                          "ipmi": {"address": "10.9.9.9", "user": "admin"}}
    ssh.save(update_fields=["driver", "driver_options"])
    base = live_server.url
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        context, page, errors = signed_in_page(browser, base, "olga", width=width,
                                               timeout_ms=PAGE_TIMEOUT_MS)
        page.goto(f"{base}/ops/nodes/{ssh.pk}/")
        facts = page.locator("dl.facts").first
        expect(facts).to_contain_text("Host key")
        expect(facts).to_contain_text("SHA256:")
        expect(facts).to_contain_text("IPMI admin@10.9.9.9")
        page.screenshot(path=str(SHOTS / f"node-ssh-{width}.png"), full_page=True)
        page.goto(f"{base}/ops/nodes/{simulated.pk}/")
        facts = page.locator("dl.facts").first
        expect(facts).to_contain_text("Wipe method")
        expect(facts).not_to_contain_text("Host key")
        expect(facts).not_to_contain_text("BMC")
        page.goto(f"{base}/ops/nodes/{simulated.pk}/edit/")
        expect(page.get_by_label("Management address")).to_be_visible()
        expect(page.get_by_label("SSH host key")).to_have_count(0)
        page.goto(f"{base}/ops/nodes/enrol/")
        # the legend names every driver that reads these fields (ssh, and imaging engines)
        expect(page.get_by_text(re.compile(r"^For ssh(, [a-z]+)* nodes$"))).to_be_visible()
        expect(page.get_by_label("SSH host key")).to_be_visible()
        page.screenshot(path=str(SHOTS / f"node-enrol-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert errors == [], errors
        context.close()
