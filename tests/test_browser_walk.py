"""In real Chromium, every page of each role at 390 px and 1280 px: no console error (a CSP
violation, a failed request, a script error) and no horizontal scroll.

Roles: anonymous, a customer member (alice), the admin of an organisation (rita, the reseller
admin: the one admin role organisations have here), an approver (sam) and an operator (olga)."""

import pytest

from portal.orders.states import OrderState
from provisioning.fulfilment import approvals
from provisioning.models import ProvisioningRun
from tests.browser_login import log_in
from tests.factories import H100_SKU, SIZED_PLAN, drain, make_node, make_quote, submitted_order

WIDTHS = (390, 1280)
NO_SCROLL = "document.documentElement.scrollWidth <= window.innerWidth"


@pytest.fixture
def world(people, catalog, sim_dir, settings):
    """A pending order, an active one (with its run and node), a quote and a spare node."""
    settings.SIMULATED_DRIVER_DELAY_SCALE = 0
    node = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-h100-a01")
    active = submitted_order(people, plan=SIZED_PLAN)
    approvals.order_approve(order=active, by=people.sam)
    run = ProvisioningRun.objects.get(order=active)
    drain(run.pk)
    active.refresh_from_db()
    assert active.state == OrderState.ACTIVE
    spare = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-h100-a02")
    pending = submitted_order(people, plan=SIZED_PLAN)
    quote = make_quote(people.acme, by=people.alice, plan=SIZED_PLAN)
    return {"active": active, "pending": pending, "quote": quote, "run": run, "node": node, "spare": spare}


def _pages(people, w):
    a, p = w["active"].reference, w["pending"].reference
    customer = ["/", "/catalog/", "/sizing/", "/sizing/?go=results", "/configure/",
                f"/configure/quotes/{w['quote'].reference}/", "/orders/", f"/orders/{p}/", f"/orders/{a}/",
                f"/orders/{a}/server/", f"/orders/{a}/terminate/", "/accounts/password_change/",
                "/account/", "/account/email/", "/account/two-factor/", "/account/two-factor/setup/"]
    return {
        None: ["/catalog/", "/sizing/", "/sizing/?go=results", "/accounts/login/",
               "/accounts/password_reset/", "/api/docs/", "/no-such-page/"],
        "alice": customer + [f"/orgs/{people.acme.slug}/"],
        "rita": ["/", "/orders/", f"/orgs/{people.reseller.slug}/", f"/orgs/{people.client_org.slug}/",
                 "/configure/"],
        "sam": ["/", "/ops/approvals/", f"/ops/runs/{w['run'].pk}/", "/ops/nodes/",
                f"/ops/nodes/{w['node'].pk}/", f"/orders/{p}/", "/account/two-factor/",
                "/ops/nodes/enrol/"],  # the last: a 403
        "olga": ["/ops/nodes/", "/ops/nodes/?q=a01", "/ops/nodes/enrol/", f"/ops/nodes/{w['spare'].pk}/",
                 f"/ops/runs/{w['run'].pk}/", "/ops/logins/", "/ops/approvals/"],  # the last: a 403
    }


@pytest.mark.browser
def test_every_page_of_every_role_is_clean_at_phone_and_desktop_width(live_server, browser, people, world):
    base, problems = live_server.url, []
    for username, paths in _pages(people, world).items():
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(15_000)
        errors = []
        page.on("console", lambda msg, errors=errors: msg.type == "error" and errors.append(msg.text))
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        if username:
            log_in(page, base, username)
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            for path in paths:
                errors.clear()
                response = page.goto(base + path, wait_until="load")
                page.wait_for_timeout(150)  # htmx's first requests (live price, results) settle
                where = f"{username or 'anonymous'} {path} at {width}px"
                expected_status = 404 if path == "/no-such-page/" else (
                    403 if (username, path) in {("sam", "/ops/nodes/enrol/"), ("olga", "/ops/approvals/")}
                    else 200)
                if response.status != expected_status:
                    problems.append(f"{where}: HTTP {response.status}")
                # a 403/404 answer itself is logged by Chromium as a failed resource: not a page error
                page_errors = [e for e in errors if "status of 40" not in e]
                if page_errors:
                    problems.append(f"{where}: console {page_errors[:3]}")
                if not page.evaluate(NO_SCROLL):
                    wide = page.evaluate("document.documentElement.scrollWidth")
                    problems.append(f"{where}: scrolls sideways ({wide}px)")
        context.close()
    assert not problems, "\n".join(problems)
