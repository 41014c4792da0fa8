"""In real Chromium: the configurator with a sizing plan attached, through its htmx path. Picking
a server the plan does not fit shows why at once and disables the quote; picking one it fits
enables it again; no console error on the way (an out-of-band swap without a target logs one)."""

import pytest
from playwright.sync_api import expect

from portal.sizing.plan_tokens import plan_sign
from tests.browser_login import log_in as _log_in
from tests.conftest import PAGE_TIMEOUT_MS
from tests.quotes.test_configurator_plan_fit import PLAN_70B

WIDTHS = (390, 1280)


@pytest.mark.browser
def test_the_plan_fit_follows_the_server_live_without_console_errors(live_server, browser, people,
                                                                     catalog, tmp_path):
    for width in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        page.set_default_timeout(PAGE_TIMEOUT_MS)
        errors = []
        page.on("console", lambda msg, errors=errors: msg.type == "error" and errors.append(msg.text))
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        _log_in(page, live_server.url, "alice")
        page.goto(f"{live_server.url}/configure/?plan={plan_sign(PLAN_70B)}")
        expect(page.get_by_role("heading", name="From your sizing")).to_be_visible()
        create = page.get_by_role("button", name="Create quote")
        expect(create).to_be_enabled()

        page.get_by_label("GPU server").select_option("1x-l4-24gb")
        expect(page.locator("#rules-sku")).to_contain_text(
            "Does not fit: needs 152.0 GB per GPU, L4 has 24.0 GB.")
        expect(create).to_be_disabled()
        page.screenshot(path=str(tmp_path / f"configurator-does-not-fit-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

        page.get_by_label("GPU server").select_option("8x-b200-sxm-180gb")
        expect(page.locator("#rules-sku")).not_to_contain_text("Does not fit")
        expect(create).to_be_enabled()
        assert errors == [], errors
        context.close()
