"""Invoices and credit notes on real PostgreSQL: the month's draft, idempotent and race-safe;
finalising numbers it from a gapless sequence and freezes it; tax; credit notes; e-mail and
webhook on issue."""

import threading
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import connection, transaction

from portal.billing import invoices
from portal.billing.models import (
    BillingProfile,
    FinalisedDocument,
    Invoice,
    InvoiceLine,
    InvoiceNumberCounter,
)
from portal.billing.selectors import month_of
from portal.billing.services import usage_sync
from portal.core.states import DomainError, TransitionNotAllowed
from portal.orders.states import OrderState
from portal.webhooks.models import WebhookEvent
from portal.webhooks.services import endpoint_create
from tests.factories import OrganisationFactory, make_order

MARCH = month_of(datetime(2026, 3, 1, tzinfo=UTC))
APRIL_2 = datetime(2026, 4, 2, tzinfo=UTC)


def at(*args):
    return datetime(*args, tzinfo=UTC)


def _march_usage(org, hours=10, nodes=1):
    order = make_order(org, state=OrderState.ACTIVE, node_count=nodes)
    meters = {n + 1: f"gpu-{n + 1}" for n in range(nodes)}
    usage_sync(order=order, nodes=meters, storage=False, at=at(2026, 3, 5, 8), cause="t")
    usage_sync(order=order, nodes={}, storage=False, at=at(2026, 3, 5, 8 + hours), cause="t")
    return order


def _profile(org, country="DE", vat_id=""):
    return BillingProfile.objects.create(organisation=org, legal_name=f"{org.name} GmbH",
                                         address="Hauptstr. 1\n10115 Berlin", country=country,
                                         vat_id=vat_id, email="ap@example.com")


def _race(*calls):
    barrier = threading.Barrier(len(calls))
    results = [None] * len(calls)

    def worker(i, call):
        try:
            barrier.wait()
            results[i] = call()
        except Exception as exc:
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


@pytest.fixture
def no_mail_queue(monkeypatch):
    """The e-mail task queued on commit is recorded instead of sent to the broker."""
    queued = []
    monkeypatch.setattr(invoices.invoice_issued_notify_task, "delay", queued.append)
    return queued


class TestClosingAMonth:
    def test_a_draft_per_organisation_with_a_line_per_node(self, catalog, people):
        order = _march_usage(people.acme, hours=10, nodes=2)
        _march_usage(people.outsider_org, hours=3)
        ids = invoices.month_close(period=MARCH, now=APRIL_2)
        assert len(ids) == 2
        invoice = Invoice.objects.get(organisation=people.acme)
        assert (invoice.state, invoice.number, invoice.period_start.isoformat()) == (
            "draft", None, "2026-03-01")
        lines = list(invoice.lines.all())
        assert [line.quantity for line in lines] == [10, 10]
        assert sum(line.amount for line in lines) == 10 * order.price_hourly
        assert invoice.subtotal == 10 * order.price_hourly
        assert invoice.events.get().transition == "draft"

    def test_closing_again_changes_nothing(self, catalog, people):
        _march_usage(people.acme)
        invoices.month_close(period=MARCH, now=APRIL_2)
        before = list(InvoiceLine.objects.values_list("pk", "key", "amount"))
        invoices.month_close(period=MARCH, now=APRIL_2)
        assert list(InvoiceLine.objects.values_list("pk", "key", "amount")) == before
        assert Invoice.objects.count() == 1 and Invoice.objects.get().events.count() == 1

    def test_a_month_not_over_is_refused(self, catalog, people):
        with pytest.raises(DomainError, match="not over yet"):
            invoices.month_close(period=MARCH, now=at(2026, 3, 31, 23))

    def test_the_default_is_last_month(self):
        assert invoices.previous_month(at(2026, 1, 15)).start == at(2025, 12, 1)


@pytest.mark.usefixtures("require_postgres")
@pytest.mark.parametrize("attempt", range(2))
def test_four_concurrent_closes_make_one_invoice_without_duplicate_lines(
        transactional_db, catalog, people, attempt):
    _march_usage(people.acme, hours=10, nodes=3)
    results = _race(*[lambda: invoices.month_close(period=MARCH, now=APRIL_2)] * 4)
    assert all(isinstance(r, list) for r in results), results
    assert Invoice.objects.filter(organisation=people.acme).count() == 1
    invoice = Invoice.objects.get(organisation=people.acme)
    assert invoice.lines.count() == 3
    assert invoice.events.filter(transition="draft").count() == 1


@pytest.mark.usefixtures("require_postgres")
def test_concurrent_finalisations_number_gaplessly(transactional_db, catalog, people,
                                                   no_mail_queue):
    orgs = [people.acme, people.outsider_org, people.reseller, OrganisationFactory(name="Fourth")]
    for org in orgs:
        _march_usage(org)
        _profile(org)
    drafts = [Invoice.objects.get(pk=pk) for pk in invoices.month_close(period=MARCH, now=APRIL_2)]
    results = _race(*[lambda d=d: invoices.invoice_finalise(invoice=d, by=people.olga) for d in drafts]
                    + [lambda: invoices.invoice_finalise(invoice=drafts[0], by=people.olga)])
    issued = [r for r in results if isinstance(r, Invoice)]
    refused = [r for r in results if isinstance(r, Exception)]
    assert len(issued) == 4 and len(refused) == 1, results
    assert isinstance(refused[0], TransitionNotAllowed)
    assert sorted(i.number for i in issued) == [f"TY-{n:06d}" for n in range(1, 5)]
    assert InvoiceNumberCounter.objects.get(issuer="TY").last_number == 4


class TestFinalising:
    def test_it_numbers_snapshots_and_announces(self, catalog, people, no_mail_queue,
                                                django_capture_on_commit_callbacks):
        endpoint_create(organisation=people.acme, url="https://hooks.example.com/in")
        _march_usage(people.acme)
        profile = _profile(people.acme)
        [pk] = invoices.month_close(period=MARCH, now=APRIL_2)
        with pytest.raises(DomainError, match="Only operators"):
            invoices.invoice_finalise(invoice=Invoice.objects.get(pk=pk), by=people.sam)
        with django_capture_on_commit_callbacks(execute=True):
            invoice = invoices.invoice_finalise(invoice=Invoice.objects.get(pk=pk), by=people.olga)
        assert invoice.number == "TY-000001" and invoice.issued_at is not None
        assert invoice.customer == {"legal_name": "Acme AI GmbH", "address": profile.address,
                                    "country": "DE", "vat_id": ""}
        assert invoice.issuer_details["name"] == "Trainyard GPU Hosting"
        assert invoice.tax_rate == Decimal("19")
        assert invoice.tax == (invoice.subtotal * Decimal("0.19")).quantize(Decimal("0.01"))
        assert invoice.total == invoice.subtotal + invoice.tax
        assert invoice.events.filter(transition="finalise", actor=people.olga).exists()
        event = WebhookEvent.objects.get(type="invoice.issued")
        assert event.data["number"] == "TY-000001" and event.data["total"] == str(invoice.total)
        assert no_mail_queue == [invoice.pk]
        # The customer's details change later: the issued invoice keeps what it was issued with.
        BillingProfile.objects.filter(pk=profile.pk).update(legal_name="Renamed Ltd")
        invoice.refresh_from_db()
        assert invoice.customer["legal_name"] == "Acme AI GmbH"

    def test_without_billing_details_it_is_refused(self, catalog, people):
        _march_usage(people.acme)
        [pk] = invoices.month_close(period=MARCH, now=APRIL_2)
        with pytest.raises(DomainError, match="no billing details"):
            invoices.invoice_finalise(invoice=Invoice.objects.get(pk=pk), by=people.olga)
        assert Invoice.objects.get(pk=pk).state == "draft"
        assert not InvoiceNumberCounter.objects.filter(last_number__gt=0).exists()  # no gap

    def test_an_issued_invoice_never_changes_through_the_orm(self, catalog, people, no_mail_queue):
        _march_usage(people.acme)
        _profile(people.acme)
        [pk] = invoices.month_close(period=MARCH, now=APRIL_2)
        invoice = invoices.invoice_finalise(invoice=Invoice.objects.get(pk=pk), by=people.olga)
        issued_total = invoice.total
        invoice.total = Decimal("1.00")
        with pytest.raises(FinalisedDocument):
            invoice.save()
        with pytest.raises(FinalisedDocument):
            invoice.delete()
        with pytest.raises(FinalisedDocument):
            Invoice.objects.filter(pk=pk).update(total=1)
        with pytest.raises(FinalisedDocument):
            Invoice.objects.filter(pk=pk).delete()
        line = invoice.lines.first()
        line.amount = Decimal("0.01")
        with pytest.raises(FinalisedDocument):
            line.save()
        with pytest.raises(FinalisedDocument):
            line.delete()
        with pytest.raises(FinalisedDocument):
            InvoiceLine.objects.filter(invoice_id=pk).update(amount=0)
        with pytest.raises(FinalisedDocument):
            InvoiceLine.objects.create(invoice=invoice, key="extra", description="x", amount=1)
        with pytest.raises(FinalisedDocument):
            InvoiceLine.objects.bulk_create([InvoiceLine(invoice=invoice, key="extra",
                                                         description="x", amount=1)])
        with pytest.raises(FinalisedDocument), transaction.atomic():
            Invoice.objects.bulk_update([invoice], ["total"])
        # A second close of the month leaves it as issued.
        invoices.month_close(period=MARCH, now=APRIL_2)
        fresh = Invoice.objects.get(pk=pk)
        assert (fresh.total, fresh.lines.count(), fresh.state) == (issued_total, 1, "issued")


class TestTax:
    @pytest.mark.parametrize(("country", "vat_id", "rate", "note"), [
        ("DE", "", Decimal("19"), ""),
        ("DE", "DE136695976", Decimal("19"), ""),  # domestic: no reverse charge
        ("FR", "FR40303265045", Decimal("0"), "Reverse charge: VAT to be accounted for by the recipient"),
        ("FR", "FR00000000000", Decimal("0"), ""),  # invalid id, no FR rate configured
        ("US", "", Decimal("0"), "Not subject to VAT in the EU"),
    ])
    def test_the_treatment_by_country_and_vat_id(self, catalog, people, no_mail_queue, country,
                                                 vat_id, rate, note):
        _march_usage(people.acme)
        _profile(people.acme, country=country, vat_id=vat_id)
        [pk] = invoices.month_close(period=MARCH, now=APRIL_2)
        invoice = invoices.invoice_finalise(invoice=Invoice.objects.get(pk=pk), by=people.olga)
        assert invoice.tax_rate == rate
        assert invoice.tax_note.startswith(note) and bool(invoice.tax_note) == bool(note)
        if note.startswith("Reverse"):
            assert "Customer VAT id: FR40303265045" in invoice.tax_note and invoice.tax == 0


class TestCreditNotes:
    def _issued(self, people):
        _march_usage(people.acme)
        _profile(people.acme)
        [pk] = invoices.month_close(period=MARCH, now=APRIL_2)
        return invoices.invoice_finalise(invoice=Invoice.objects.get(pk=pk), by=people.olga)

    def test_a_credit_note_references_the_invoice_and_is_numbered_on_issue(self, catalog, people,
                                                                          no_mail_queue):
        invoice = self._issued(people)
        note = invoices.credit_note_create(invoice=invoice, amount="10.00", by=people.olga,
                                           reason="Failed provisioning charged on 5 March")
        assert (note.kind, note.credit_for, note.state) == ("credit_note", invoice, "draft")
        assert note.subtotal == Decimal("-10.00") and note.tax == Decimal("-1.90")
        issued = invoices.invoice_finalise(invoice=note, by=people.olga)
        assert issued.number == "TY-000002"
        invoice.refresh_from_db()
        assert invoice.state == "issued" and invoice.total != issued.total  # the invoice is as it was

    def test_never_more_than_the_invoice_and_only_by_staff(self, catalog, people, no_mail_queue):
        invoice = self._issued(people)
        with pytest.raises(DomainError, match="Only operators"):
            invoices.credit_note_create(invoice=invoice, amount="1", reason="x", by=people.alice)
        with pytest.raises(DomainError, match="left to credit"):
            invoices.credit_note_create(invoice=invoice, amount=invoice.subtotal + 1, reason="x",
                                        by=people.olga)
        invoices.credit_note_create(invoice=invoice, amount=invoice.subtotal, reason="all",
                                    by=people.olga)
        with pytest.raises(DomainError, match="left to credit"):
            invoices.credit_note_create(invoice=invoice, amount="0.01", reason="x", by=people.olga)
        with pytest.raises(DomainError, match="why"):
            invoices.credit_note_create(invoice=invoice, amount="1", reason=" ", by=people.olga)

    def test_a_draft_cannot_be_credited(self, catalog, people):
        _march_usage(people.acme)
        [pk] = invoices.month_close(period=MARCH, now=APRIL_2)
        with pytest.raises(DomainError, match="corrects an issued invoice"):
            invoices.credit_note_create(invoice=Invoice.objects.get(pk=pk), amount="1", reason="x",
                                        by=people.olga)


def test_the_issue_e_mail_is_sent_once(catalog, people, mailoutbox, no_mail_queue):
    from portal.billing.notifications import invoice_issued_notify

    _march_usage(people.acme)
    _profile(people.acme)
    [pk] = invoices.month_close(period=MARCH, now=APRIL_2)
    invoice = invoices.invoice_finalise(invoice=Invoice.objects.get(pk=pk), by=people.olga)
    assert invoice_issued_notify(invoice_id=invoice.pk) == 1
    assert invoice_issued_notify(invoice_id=invoice.pk) == 0
    [mail] = mailoutbox
    assert mail.to == ["ap@example.com"] and "TY-000001" in mail.subject
    assert f"/billing/{people.acme.slug}/invoices/TY-000001/" in mail.body
