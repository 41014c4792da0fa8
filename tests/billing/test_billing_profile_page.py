"""The billing details page: an organisation's admins edit who its invoices are made out to
(validated by python-stdnum as the model is, audited); its other members read them; others get
404; an issued invoice keeps the details it was issued with."""

from datetime import UTC, datetime

import pytest

from portal.accounts.models import Membership
from portal.billing import invoices
from portal.billing.models import BillingProfile, BillingProfileEvent, Invoice
from portal.billing.selectors import month_of
from portal.billing.services import usage_sync
from portal.orders.states import OrderState
from tests.factories import make_order

GOOD = {"legal_name": "Acme AI GmbH", "address": "Hauptstr. 1\n10115 Berlin", "country": "de",
        "vat_id": "DE 136 695 976", "email": "ap@acme.example"}


def _url(org) -> str:
    return f"/billing/{org.slug}/profile/"


@pytest.fixture
def admin(people):
    Membership.objects.filter(user=people.alice, organisation=people.acme).update(
        role=Membership.Role.ADMIN)
    return people.alice


def test_an_admin_adds_the_details_and_the_change_is_audited(login, catalog, people, admin):
    client = login(admin)
    page = client.get(_url(people.acme))
    assert page.status_code == 200 and "Add the details" in page.content.decode()
    response = client.post(_url(people.acme), GOOD)
    assert response.status_code == 302 and response["Location"] == _url(people.acme)
    profile = BillingProfile.objects.get(organisation=people.acme)
    assert (profile.legal_name, profile.country, profile.vat_id) == ("Acme AI GmbH", "DE", "DE136695976")
    client.post(_url(people.acme), {**GOOD, "legal_name": "Acme AI SE"})
    events = list(BillingProfileEvent.objects.filter(organisation=people.acme).order_by("pk"))
    assert [(e.transition, e.actor_id) for e in events] == [("create", admin.pk), ("edit", admin.pk)]
    assert events[1].note == "legal name: 'Acme AI GmbH' → 'Acme AI SE'"
    client.post(_url(people.acme), {**GOOD, "legal_name": "Acme AI SE"})  # nothing changed
    assert BillingProfileEvent.objects.filter(organisation=people.acme).count() == 2


@pytest.mark.parametrize(("field", "value", "message"), [
    ("vat_id", "DE123456789", "is not a valid EU VAT id"),
    ("vat_id", "FR40303265045", "is not one of DE"),
    ("country", "Germany", "Two letters"),
    ("legal_name", "", "This field is required"),
])
def test_a_bad_detail_is_explained_inline_and_nothing_is_lost(login, catalog, people, admin,
                                                             field, value, message):
    client = login(admin)
    client.post(_url(people.acme), GOOD)
    response = client.post(_url(people.acme), {**GOOD, "address": "New street 2\n10117 Berlin",
                                               field: value})
    html = response.content.decode()
    assert response.status_code == 400 and message in html
    assert f'id="id_{field}-error"' in html or f"id_{field}" in html
    assert "New street 2" in html  # what was typed is shown again
    profile = BillingProfile.objects.get(organisation=people.acme)
    assert (profile.address, profile.vat_id) == (GOOD["address"], "DE136695976")  # unchanged
    assert BillingProfileEvent.objects.filter(organisation=people.acme).count() == 1


def test_a_member_reads_the_details_and_cannot_change_them(login, catalog, people, admin):
    login(admin).post(_url(people.acme), GOOD)
    member = people.acme.memberships.create(user=people.charlie.__class__.objects.create_user(
        username="mo", email="mo@example.com", password="x" * 12)).user
    client = login(member)
    page = client.get(_url(people.acme)).content.decode()
    assert "Acme AI GmbH" in page and "Save billing details" not in page
    assert "Only an admin of Acme AI can change these details" in page
    assert client.post(_url(people.acme), {**GOOD, "legal_name": "Hijack Ltd"}).status_code == 403
    assert BillingProfile.objects.get(organisation=people.acme).legal_name == "Acme AI GmbH"


def test_an_outsider_gets_404(login, catalog, people, admin):
    login(admin).post(_url(people.acme), GOOD)
    client = login(people.charlie)
    assert client.get(_url(people.acme)).status_code == 404
    assert client.post(_url(people.acme), {**GOOD, "legal_name": "Hijack Ltd"}).status_code == 404
    assert BillingProfile.objects.get(organisation=people.acme).legal_name == "Acme AI GmbH"


def test_a_reseller_admin_edits_its_customers_details(login, catalog, people):
    response = login(people.rita).post(_url(people.client_org), {**GOOD, "legal_name": "Client BV"})
    assert response.status_code == 302
    assert BillingProfile.objects.get(organisation=people.client_org).legal_name == "Client BV"


def test_the_billing_page_links_to_the_details(login, catalog, people):
    html = login(people.alice).get(f"/billing/{people.acme.slug}/").content.decode()
    assert f'href="{_url(people.acme)}"' in html


def test_an_issued_invoice_keeps_the_details_it_was_issued_with(login, catalog, people, admin,
                                                                monkeypatch):
    monkeypatch.setattr(invoices.invoice_issued_notify_task, "delay", lambda pk: None)
    client = login(admin)
    client.post(_url(people.acme), GOOD)
    order = make_order(people.acme, state=OrderState.ACTIVE)
    usage_sync(order=order, nodes={1: "gpu-1"}, storage=False, at=datetime(2026, 3, 3, 9, tzinfo=UTC),
               cause="t")
    usage_sync(order=order, nodes={}, storage=False, at=datetime(2026, 3, 3, 21, tzinfo=UTC), cause="t")
    [pk] = invoices.month_close(period=month_of(datetime(2026, 3, 1, tzinfo=UTC)),
                                now=datetime(2026, 4, 2, tzinfo=UTC))
    issued = invoices.invoice_finalise(invoice=Invoice.objects.get(pk=pk), by=people.olga)
    snapshot = dict(issued.customer)
    assert snapshot["legal_name"] == "Acme AI GmbH"
    response = client.post(_url(people.acme), {**GOOD, "legal_name": "Renamed AG",
                                               "address": "Neuer Weg 5\n80331 München"})
    assert response.status_code == 302
    issued.refresh_from_db()
    assert issued.customer == snapshot
    html = client.get(f"/billing/{people.acme.slug}/invoices/{issued.number}/").content.decode()
    assert "Acme AI GmbH" in html and "Renamed AG" not in html
