"""Staff billing pages: operators finalise drafts and draft credit notes (audited); everyone
else is kept out (customers: 404, approvers: 403)."""

from datetime import UTC, datetime

from portal.billing import invoices
from portal.billing.models import BillingProfile, Invoice
from portal.billing.selectors import month_of
from portal.billing.services import usage_sync
from portal.orders.states import OrderState
from tests.factories import make_order


def _draft(people):
    order = make_order(people.acme, state=OrderState.ACTIVE)
    usage_sync(order=order, nodes={1: "gpu-1"}, storage=False,
               at=datetime(2026, 3, 3, 9, tzinfo=UTC), cause="t")
    usage_sync(order=order, nodes={}, storage=False, at=datetime(2026, 3, 3, 12, tzinfo=UTC), cause="t")
    [pk] = invoices.month_close(period=month_of(datetime(2026, 3, 1, tzinfo=UTC)),
                                now=datetime(2026, 4, 2, tzinfo=UTC))
    return Invoice.objects.get(pk=pk)


def test_an_operator_finalises_a_draft_and_drafts_a_credit_note(catalog, people, login, monkeypatch):
    monkeypatch.setattr(invoices.invoice_issued_notify_task, "delay", lambda pk: None)
    draft = _draft(people)
    client = login(people.olga)
    page = client.get("/ops/billing/").content.decode()
    assert "Drafts to review (1)" in page and "Acme AI" in page
    response = client.post(f"/ops/billing/invoices/{draft.pk}/finalise/", follow=True)
    assert "has no billing details" in response.content.decode()
    BillingProfile.objects.create(organisation=people.acme, legal_name="Acme AI GmbH", address="x",
                                  country="DE")
    response = client.post(f"/ops/billing/invoices/{draft.pk}/finalise/", follow=True)
    draft.refresh_from_db()
    assert draft.number == "TY-000001" and "Issued as TY-000001" in response.content.decode()
    assert draft.events.get(transition="finalise").actor == people.olga
    bad = client.post(f"/ops/billing/invoices/{draft.pk}/credit-note/", {"amount": "0", "reason": "x"})
    assert bad.status_code == 400
    too_much = client.post(f"/ops/billing/invoices/{draft.pk}/credit-note/",
                           {"amount": str(draft.subtotal + 1), "reason": "x"})
    assert too_much.status_code == 400 and "left to credit" in too_much.content.decode()
    client.post(f"/ops/billing/invoices/{draft.pk}/credit-note/",
                {"amount": "5.00", "reason": "Failed provisioning charged"})
    note = Invoice.objects.get(kind="credit_note")
    assert (note.credit_for, note.subtotal, note.state) == (draft, -5, "draft")
    assert note.events.get(transition="draft").actor == people.olga


def test_the_close_button_drafts_last_month(catalog, people, login):
    response = login(people.olga).post("/ops/billing/close/", follow=True)
    assert response.status_code == 200 and "invoice(s) drafted" in response.content.decode()


def test_customers_get_404_and_approvers_403(catalog, people, login):
    draft = _draft(people)
    for user, status in ((people.alice, 404), (people.sam, 403)):
        client = login(user)
        assert client.get("/ops/billing/").status_code == status
        assert client.post(f"/ops/billing/invoices/{draft.pk}/finalise/").status_code == status
    assert Invoice.objects.get(pk=draft.pk).state == "draft"
