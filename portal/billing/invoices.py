"""Invoices and credit notes: the month's draft per organisation (idempotent: keyed lines, one
invoice per organisation and month), staff finalise it (a number from the issuer's gapless
sequence, the customer's and issuer's details copied, the tax decided), then it never changes;
a correction is a credit note referencing it, finalised the same way.

Every state change goes through ``INVOICE_TRANSITIONS`` with an audit row; the e-mail and the
``invoice.issued`` webhook leave after the commit."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from portal.accounts.models import Organisation
from portal.billing.mail_tasks import invoice_issued_notify_task
from portal.billing.models import (
    BillingProfile,
    Invoice,
    InvoiceEvent,
    InvoiceLine,
    InvoiceNumberCounter,
    UsageInterval,
)
from portal.billing.selectors import Period, as_of, month_of, usage_costs
from portal.billing.tax import tax_treatment
from portal.catalog.pricing import money
from portal.core.states import DomainError, Transition, TransitionTable, actor_or_none, transition
from portal.orders.models import Order
from portal.webhooks.events import EventType
from portal.webhooks.publish import event_publish

logger = logging.getLogger(__name__)
S = Invoice.State
INVOICE_TRANSITIONS = TransitionTable("invoice", [
    Transition("finalise", frozenset({S.DRAFT}), S.ISSUED, "Finalised and issued"),
], labels=dict(S.choices))
ZERO = Decimal("0.00")


def require_billing_staff(by) -> None:
    if not getattr(by, "is_operator", False):
        raise DomainError("Only operators (staff) can finalise invoices and issue credit notes.")


def _event(invoice: Invoice, name: str, note: str, by=None) -> InvoiceEvent:
    return InvoiceEvent.objects.create(invoice=invoice, actor=actor_or_none(by), transition=name,
                                       from_state=invoice.state, to_state=invoice.state, note=note)


# --- closing a month ---------------------------------------------------------------------------

def month_close(*, period: Period | None = None, now: datetime | None = None, by=None) -> list[int]:
    """Drafts (or refreshes) the invoice of every organisation with usage in ``period`` (default:
    the month before now's); returns the invoices' ids. Safe to run any number of times, also
    at once: each organisation's invoice is one row, its lines keyed."""
    now = (now or timezone.now()).astimezone(UTC)
    period = period or previous_month(now)
    if period.end > now:
        raise DomainError(f"{period.label} is not over yet; it closes on {period.end:%Y-%m-%d}.")
    org_ids = (UsageInterval.objects.filter(started_at__lt=period.end)
               .exclude(ended_at__lte=period.start).values_list("order__organisation_id", flat=True)
               .distinct())
    # A reseller's customers are billed to the reseller (lines per customer), not themselves.
    payers = {org.parent_id or org.pk
              for org in Organisation.objects.filter(pk__in=set(org_ids)).only("pk", "parent_id")}
    return [invoice_draft(organisation=org, period=period, by=by).pk
            for org in Organisation.objects.filter(pk__in=payers).order_by("pk")]


def previous_month(now: datetime) -> Period:
    start = month_of(now).start
    return month_of(start.replace(year=start.year - 1, month=12) if start.month == 1
                    else start.replace(month=start.month - 1))


def invoice_draft(*, organisation: Organisation, period: Period, by=None) -> Invoice:
    """The organisation's invoice of ``period`` with a line per order meter; an issued one is
    returned as it is."""
    invoice, created = Invoice.objects.get_or_create(
        organisation=organisation, kind=Invoice.Kind.INVOICE, period_start=period.start.date(),
        defaults={"issuer": settings.BILLING_NUMBER_PREFIX})
    with transaction.atomic():
        invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)
        if invoice.is_issued:
            return invoice
        changed = _lines_write(invoice, _usage_lines(organisation, period))
        _totals_write(invoice)
        if created or changed:
            _event(invoice, "draft" if created else "refresh",
                   f"{'drafted' if created else 'refreshed'} from the usage of {period.label}", by)
    return invoice


def _usage_lines(organisation: Organisation, period: Period) -> list[dict]:
    """A line per order meter of ``organisation`` and, for a reseller, of each of its customers
    (named on the line, the reseller's own first)."""
    customers = dict(Organisation.objects.filter(parent=organisation).values_list("pk", "name"))
    costs = usage_costs(organisation_ids=[organisation.pk, *customers], at=as_of(period))
    orders = {o.pk: o for o in Order.objects.filter(pk__in=[c.order_id for c in costs])
              .only("pk", "reference", "organisation_id")}
    costs.sort(key=lambda c: (orders[c.order_id].organisation_id != organisation.pk,
                              customers.get(orders[c.order_id].organisation_id, ""), c.order_id))
    lines = []
    for cost in costs:
        order = orders[cost.order_id]
        customer = f"{customers[order.organisation_id]}: " if order.organisation_id in customers else ""
        for m in cost.meters:
            what = "object storage" if m.kind == UsageInterval.Kind.STORAGE else f"node {m.label}"
            capped = ", monthly rate" if m.by_month else ""
            lines.append({"key": f"{cost.order_id}:{m.kind}:{m.meter}", "order_id": cost.order_id,
                          "description": f"{customer}Order {order.reference}, {what} "
                                         f"({m.units} h{capped})",
                          "quantity": Decimal(m.units), "amount": m.so_far})
    return lines


def _lines_write(invoice: Invoice, lines: list[dict]) -> bool:
    existing = {line.key: line for line in invoice.lines.all()}
    new = []
    changed = False
    for position, data in enumerate(lines):
        line = existing.pop(data["key"], None)
        if line is None:
            new.append(InvoiceLine(invoice=invoice, position=position, **data))
        elif any(getattr(line, k) != v for k, v in data.items()) or line.position != position:
            for key, value in data.items():
                setattr(line, key, value)
            line.position = position
            line.save()
            changed = True
    for line in existing.values():
        line.delete()
        changed = True
    InvoiceLine.objects.bulk_create(new)
    return changed or bool(new)


def _treatment(organisation: Organisation):
    profile = BillingProfile.objects.filter(organisation=organisation).first()
    country = profile.country if profile else settings.BILLING_ISSUER["country"]
    return profile, tax_treatment(customer_country=country, vat_id=profile.vat_id if profile else "",
                                  issuer_country=settings.BILLING_ISSUER["country"],
                                  rates=settings.BILLING_TAX_RATES)


def _totals_write(invoice: Invoice, *, rate: Decimal | None = None, note: str | None = None) -> None:
    if rate is None:
        _, treatment = _treatment(invoice.organisation)
        rate, note = treatment.rate_percent, treatment.note
    subtotal = money(sum((line.amount for line in invoice.lines.all()), ZERO))
    invoice.subtotal, invoice.tax_rate, invoice.tax_note = subtotal, rate, note or ""
    invoice.tax = money(subtotal * rate / 100)
    invoice.total = invoice.subtotal + invoice.tax
    invoice.save(update_fields=["subtotal", "tax_rate", "tax", "total", "tax_note"])


# --- finalising -------------------------------------------------------------------------------

def number_next(issuer: str) -> str:
    """The issuer's next number; the counter row stays locked until the caller's transaction
    ends, so numbers are handed out one at a time and a rolled-back finalisation returns its."""
    InvoiceNumberCounter.objects.get_or_create(issuer=issuer)
    counter = InvoiceNumberCounter.objects.select_for_update().get(issuer=issuer)
    counter.last_number += 1
    counter.save(update_fields=["last_number"])
    return f"{issuer}-{counter.last_number:06d}"


def invoice_finalise(*, invoice: Invoice, by) -> Invoice:
    """Staff: numbers the draft, copies the customer's and issuer's details and the tax, issues
    it. Refused without the organisation's billing details, or for an empty invoice."""
    require_billing_staff(by)
    with transaction.atomic():
        locked = Invoice.objects.select_for_update().select_related("organisation").get(pk=invoice.pk)
        INVOICE_TRANSITIONS.check("finalise", locked.state, subject=str(locked))
        profile, treatment = _treatment(locked.organisation)
        if profile is None:
            raise DomainError(f"{locked.organisation.name} has no billing details (legal name, "
                              f"address, country); add them before the invoice is issued.")
        if not locked.lines.exists():
            raise DomainError("The invoice has no lines; there is nothing to issue.")
        if locked.kind == Invoice.Kind.INVOICE:
            _totals_write(locked, rate=treatment.rate_percent, note=treatment.note)
        customer = {"legal_name": profile.legal_name, "address": profile.address,
                    "country": profile.country, "vat_id": profile.vat_id}

        def record(row, from_state, to_state, actor):
            return InvoiceEvent.objects.create(invoice=row, actor=actor, transition="finalise",
                                               from_state=from_state, to_state=to_state,
                                               note=f"issued as {row.number}")

        locked, _ = transition(locked, table=INVOICE_TRANSITIONS, name="finalise", by=by,
                               record=record, subject=str(locked), fields={
                                   "number": number_next(locked.issuer), "issued_at": timezone.now(),
                                   "state_changed_at": timezone.now(), "customer": customer,
                                   "issuer_details": dict(settings.BILLING_ISSUER)})
        event_publish(organisation=locked.organisation, type=EventType.INVOICE_ISSUED,
                      data=lambda: invoice_webhook_data(locked))
        _notify_later(locked.pk)
    return locked


def invoice_webhook_data(invoice: Invoice) -> dict:
    return {"number": invoice.number, "kind": invoice.kind, "month": f"{invoice.period_start:%Y-%m}",
            "organisation": invoice.organisation.slug, "currency": invoice.currency,
            "subtotal": str(invoice.subtotal), "tax": str(invoice.tax), "total": str(invoice.total),
            "credit_for": invoice.credit_for.number if invoice.credit_for_id else None,
            "issued_at": invoice.issued_at.isoformat()}


def _notify_later(invoice_id: int) -> None:
    def send():
        try:
            invoice_issued_notify_task.delay(invoice_id)
        except Exception:
            logger.exception("could not queue the invoice e-mail", extra={"invoice": invoice_id})
    transaction.on_commit(send)


# --- credit notes -----------------------------------------------------------------------------

def credit_note_create(*, invoice: Invoice, amount, reason: str, by, order: Order | None = None) -> Invoice:
    """Staff: a draft credit note of ``amount`` (before tax) against an issued invoice, e.g. for
    a failed provisioning charged or an adjustment; never more than is left to credit."""
    require_billing_staff(by)
    amount = money(amount)
    if amount <= 0:
        raise DomainError("A credit note credits a positive amount.")
    if not reason.strip():
        raise DomainError("Say why the amount is credited; the customer reads it on the credit note.")
    with transaction.atomic():
        original = Invoice.objects.select_for_update().get(pk=invoice.pk)
        if not original.is_issued or original.kind != Invoice.Kind.INVOICE:
            raise DomainError("A credit note corrects an issued invoice.")
        credited = -sum((n.subtotal for n in original.credit_notes.all()), ZERO)
        if amount > original.subtotal - credited:
            raise DomainError(f"At most {original.subtotal - credited} {original.currency} of "
                              f"{original.number} is left to credit.")
        note = Invoice.objects.create(
            organisation=original.organisation, kind=Invoice.Kind.CREDIT_NOTE,
            period_start=original.period_start, credit_for=original, reason=reason.strip(),
            issuer=original.issuer, currency=original.currency)
        InvoiceLine.objects.create(invoice=note, key="credit:1", order=order, quantity=Decimal(1),
                                   description=f"Credit against invoice {original.number}: "
                                               f"{reason.strip()}"[:300], amount=-amount)
        _totals_write(note, rate=original.tax_rate, note=original.tax_note)
        _event(note, "draft", f"credit of {amount} {note.currency} against {original.number}", by)
    return note
