"""No console errors (issue 29, item 11): the wizard's results (no out-of-band swap without a
target), "Update plans" clicked while a request runs (no aborted request logged), and the admin
pages (no favicon 404). Phone and desktop width."""

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser_login import log_in
from tests.conftest import PAGE_TIMEOUT_MS

WIDTHS = (390, 1280)
SHOTS = Path(os.environ.get("TRAINYARD_SHOTS", "/tmp/trainyard-shots"))


def _watch(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("response", lambda r: r.status >= 400 and errors.append(f"{r.status} {r.url}"))
    return errors


@pytest.mark.browser
def test_the_wizard_results_and_update_plans_log_no_error(live_server, browser, catalog):
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        page.set_default_timeout(PAGE_TIMEOUT_MS)
        errors = _watch(page)
        page.goto(f"{live_server.url}/sizing/")
        for step in ("Next: training setup", "Next: data", "Next: goal"):
            page.get_by_role("button", name=step, exact=True).click()
        page.get_by_role("button", name="Show plans", exact=True).click()  # not "Show plans now"
        expect(page.get_by_role("heading", name=re.compile("Recommended for"))).to_be_visible(
            timeout=PAGE_TIMEOUT_MS)
        update = page.get_by_role("button", name="Update plans")
        page.get_by_label("Shortest time").check()  # a request is under way …
        update.click()  # … and another one asked for
        update.click()
        expect(page.locator("article.plan-card")).to_have_count(5, timeout=PAGE_TIMEOUT_MS)
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(SHOTS / f"wizard-results-{width}.png"), full_page=True)
        assert errors == [], errors
        context.close()


@pytest.mark.browser
def test_admin_pages_ask_for_no_missing_favicon(live_server, browser, people):
    people.olga.is_superuser = True
    people.olga.save()
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    errors = _watch(page)
    log_in(page, live_server.url, "olga")  # the admin is behind the portal's two-factor sign-in
    page.goto(f"{live_server.url}/admin/")
    page.goto(f"{live_server.url}/favicon.ico")
    assert errors == [], errors
    context.close()
