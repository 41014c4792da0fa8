"""In real Chromium at phone and desktop width: the organisation's billing page and the cost card
of the server page, with no console error; screenshots for a person to look at."""

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from portal.accounts.models import Membership
from portal.billing import invoices
from portal.billing.models import BillingProfile, Invoice
from portal.billing.selectors import month_of
from portal.billing.services import usage_sync
from portal.billing.spend import spend_limit_set
from portal.orders.states import OrderState
from tests.browser_login import signed_in_page
from tests.conftest import PAGE_TIMEOUT_MS
from tests.factories import make_order

WIDTHS = (390, 1280)
SHOTS = Path(os.environ.get("TRAINYARD_SHOTS", "/tmp/trainyard-shots"))


@pytest.mark.browser
def test_the_billing_page_and_the_server_cost(live_server, browser, people, catalog):
    now = timezone.now().astimezone(UTC)
    start = max(now - timedelta(hours=5, minutes=20), month_of(now).start)
    cluster = make_order(people.acme, state=OrderState.ACTIVE, node_count=2, network="ib-ndr-400g",
                         plan={"model": "Llama", "train_hours": 30.0})
    usage_sync(order=cluster, nodes={1: "gpu-h100-a01", 2: "gpu-h100-a02"}, storage=False, at=start,
               cause="hand-over")
    single = make_order(people.acme, state=OrderState.TERMINATED, sku="1x-l4-24gb")
    usage_sync(order=single, nodes={3: "gpu-l4-07"}, storage=False, at=start, cause="hand-over")
    usage_sync(order=single, nodes={}, storage=False, at=start + timedelta(hours=2), cause="end")
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        context, page, errors = signed_in_page(browser, live_server.url, "alice", width=width,
                                               timeout_ms=PAGE_TIMEOUT_MS)
        page.goto(f"{live_server.url}/billing/")
        expect(page.get_by_role("heading", name="Billing", exact=True)).to_be_visible()
        expect(page.locator("#usage-table")).to_contain_text(cluster.reference)
        expect(page.locator("#usage-table")).to_contain_text("gpu-l4-07")
        page.screenshot(path=str(SHOTS / f"billing-{width}.png"), full_page=True)
        page.goto(f"{live_server.url}/orders/{cluster.reference}/server/")
        expect(page.locator("#order-cost")).to_contain_text("so far in")
        page.locator("#order-cost").screenshot(path=str(SHOTS / f"server-cost-{width}.png"))
        expect(page.locator("#terminate-at")).to_contain_text("Stop on time")
        page.screenshot(path=str(SHOTS / f"server-{width}.png"), full_page=True)
        assert errors == [], errors
        context.close()


@pytest.mark.browser
def test_an_invoice_at_phone_and_desktop_width(live_server, browser, people, catalog, monkeypatch):
    monkeypatch.setattr(invoices.invoice_issued_notify_task, "delay", lambda pk: None)
    order = make_order(people.acme, state=OrderState.ACTIVE, node_count=2, network="ib-ndr-400g")
    usage_sync(order=order, nodes={1: "gpu-h100-a01", 2: "gpu-h100-a02"}, storage=False,
               at=datetime(2026, 3, 3, 9, tzinfo=UTC), cause="t")
    usage_sync(order=order, nodes={}, storage=False, at=datetime(2026, 3, 6, 17, 20, tzinfo=UTC),
               cause="t")
    BillingProfile.objects.create(organisation=people.acme, legal_name="Acme AI SAS",
                                  address="1 rue de la Paix\n75002 Paris", country="FR",
                                  vat_id="FR40303265045")
    [pk] = invoices.month_close(period=month_of(datetime(2026, 3, 1, tzinfo=UTC)),
                                now=datetime(2026, 4, 2, tzinfo=UTC))
    invoice = invoices.invoice_finalise(invoice=Invoice.objects.get(pk=pk), by=people.olga)
    spend_limit_set(organisation=people.acme, monthly_usd="5000")
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        context, page, errors = signed_in_page(browser, live_server.url, "alice", width=width,
                                               timeout_ms=PAGE_TIMEOUT_MS)
        page.goto(f"{live_server.url}/billing/{people.acme.slug}/")
        expect(page.locator("#invoice-table")).to_contain_text(invoice.number)
        expect(page.locator("#spend-limit")).to_contain_text("$5,000.00")
        page.screenshot(path=str(SHOTS / f"billing-invoices-{width}.png"), full_page=True)
        page.get_by_role("link", name=invoice.number).click()
        expect(page.get_by_role("heading", name=f"Invoice {invoice.number}")).to_be_visible()
        expect(page.locator(".invoice-tax-note")).to_contain_text("Reverse charge")
        page.screenshot(path=str(SHOTS / f"invoice-{width}.png"), full_page=True)
        assert errors == [], errors
        context.close()


@pytest.mark.browser
def test_the_staff_billing_pages(live_server, browser, people, catalog):
    order = make_order(people.acme, state=OrderState.ACTIVE)
    usage_sync(order=order, nodes={1: "gpu-h100-a01"}, storage=False,
               at=datetime(2026, 3, 3, 9, tzinfo=UTC), cause="t")
    usage_sync(order=order, nodes={}, storage=False, at=datetime(2026, 3, 4, 9, tzinfo=UTC), cause="t")
    [pk] = invoices.month_close(period=month_of(datetime(2026, 3, 1, tzinfo=UTC)),
                                now=datetime(2026, 4, 2, tzinfo=UTC))
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        context, page, errors = signed_in_page(browser, live_server.url, "olga", width=width,
                                               timeout_ms=PAGE_TIMEOUT_MS)
        page.goto(f"{live_server.url}/ops/billing/")
        expect(page.locator("#draft-table")).to_contain_text("Acme AI")
        page.screenshot(path=str(SHOTS / f"staff-billing-{width}.png"), full_page=True)
        page.goto(f"{live_server.url}/ops/billing/invoices/{pk}/")
        expect(page.get_by_role("button", name="Finalise and issue")).to_be_visible()
        page.screenshot(path=str(SHOTS / f"staff-draft-{width}.png"), full_page=True)
        assert errors == [], errors
        context.close()


@pytest.mark.browser
def test_the_billing_details_page(live_server, browser, people, catalog):
    """An admin goes from the billing page to the billing details, is told inline what is wrong
    with a VAT id (what was typed stays), corrects it and saves."""
    Membership.objects.filter(user=people.alice).update(role=Membership.Role.ADMIN)
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        BillingProfile.objects.filter(organisation=people.acme).delete()
        context, page, errors = signed_in_page(browser, live_server.url, "alice", width=width,
                                               timeout_ms=PAGE_TIMEOUT_MS)
        page.goto(f"{live_server.url}/billing/{people.acme.slug}/")
        page.get_by_role("link", name="Billing details").click()
        expect(page.get_by_role("heading", name="Billing details")).to_be_visible()
        page.get_by_label("Legal name").fill("Acme AI GmbH")
        page.get_by_label("Address").fill("Hauptstraße 1\n10115 Berlin")
        page.get_by_label("Country").fill("DE")
        page.get_by_label("VAT id (EU businesses)").fill("DE123456789")
        page.get_by_label("Invoice e-mail").fill("ap@acme.example")
        page.get_by_role("button", name="Save billing details").click()
        expect(page.locator("#id_vat_id-error")).to_contain_text("not a valid EU VAT id")
        expect(page.get_by_label("Address")).to_have_value("Hauptstraße 1\n10115 Berlin")
        page.screenshot(path=str(SHOTS / f"billing-profile-error-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert [e for e in errors if "status of 400" not in e] == [], errors  # the form's answer
        errors.clear()
        page.get_by_label("VAT id (EU businesses)").fill("DE136695976")
        page.get_by_role("button", name="Save billing details").click()
        expect(page.locator(".messages")).to_contain_text("Billing details saved")
        expect(page.get_by_label("Legal name")).to_have_value("Acme AI GmbH")
        page.screenshot(path=str(SHOTS / f"billing-profile-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert errors == [], errors
        context.close()
    assert BillingProfile.objects.get(organisation=people.acme).vat_id == "DE136695976"
